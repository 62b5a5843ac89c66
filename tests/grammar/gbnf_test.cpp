// GBNF: parsing, matching, errors with positions, refused left recursion, limits.
#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace ll3::grammar {
namespace {

using test::accepted_prefix;
using test::gbnf;
using test::matches;

TEST(Gbnf, LiteralsAlternativesAndGroups) {
  auto g = gbnf("root ::= \"a\" (\"b\" | \"cd\")+ \"e\"?\n");
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "abcdbe"));
  EXPECT_FALSE(matches(g, "a"));       // + needs one
  EXPECT_FALSE(matches(g, "ace"));     // "c" alone is not "cd"
  EXPECT_EQ(accepted_prefix(g, "abx"), 2u);
  EXPECT_EQ(accepted_prefix(g, "abee"), 3u);  // one optional e
}

TEST(Gbnf, RulesCommentsAndMultiline) {
  auto g = gbnf(R"(# a comment
root ::= greeting ws name   # trailing comment
greeting ::=
    "hello" |
    "hi"
name ::= ( [A-Z]
           [a-z]* )
ws ::= [ \t]+
)");
  EXPECT_TRUE(matches(g, "hello Bob"));
  EXPECT_TRUE(matches(g, "hi \tX"));
  EXPECT_FALSE(matches(g, "hi bob"));
  EXPECT_FALSE(matches(g, "hellothere Bob"));
}

TEST(Gbnf, Repetitions) {
  auto g = gbnf("root ::= [0-9]{2} \"-\" [a-z]{1,3} \"-\" \"x\"{2,} \"-\" \"y\"{0,2}\n");
  EXPECT_TRUE(matches(g, "12-a-xx-"));
  EXPECT_TRUE(matches(g, "12-abc-xxxxx-yy"));
  EXPECT_FALSE(matches(g, "1-a-xx-"));
  EXPECT_FALSE(matches(g, "12-abcd-xx-"));
  EXPECT_FALSE(matches(g, "12-a-x-"));
  EXPECT_FALSE(matches(g, "12-a-xx-yyy"));
  Matcher m(g);
  ASSERT_TRUE(m.accept("12-a-xx-yy"));
  EXPECT_TRUE(m.must_end());  // nothing can follow two y
}

TEST(Gbnf, EscapesInLiteralsAndClasses) {
  auto g = gbnf(R"(root ::= "\"\\\n\t" [\x41-\x43] "\u00e9" [\]] "\U0001F600")" "\n");
  EXPECT_TRUE(matches(g, "\"\\\n\tB\xC3\xA9]\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "\"\\\n\tD\xC3\xA9]\xF0\x9F\x98\x80"));
}

TEST(Gbnf, ClassesAreUtf8) {
  auto g = gbnf("root ::= [^\"\\\\]+\n");
  EXPECT_TRUE(matches(g, "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(matches(g, "a\"b"));
  EXPECT_FALSE(matches(g, "\xC3"));              // a truncated sequence never completes
  EXPECT_EQ(accepted_prefix(g, "a\xC0\x80"), 1u);  // overlong encodings are not UTF-8
  EXPECT_EQ(accepted_prefix(g, "a\xED\xA0\x80"), 2u);  // nor surrogates (ED A0..BF)
  EXPECT_EQ(accepted_prefix(g, "a\xF4\x90\x80\x80"), 2u);  // nor beyond U+10FFFF
  auto greek = gbnf("root ::= [α-ω]\n");
  EXPECT_TRUE(matches(greek, "\xCE\xB2"));  // β
  EXPECT_FALSE(matches(greek, "b"));
  auto any = gbnf("root ::= . .\n");
  EXPECT_TRUE(matches(any, "x\xE2\x82\xAC"));
}

TEST(Gbnf, MinBytesToEnd) {
  auto g = gbnf("root ::= \"ab\" x\nx ::= \"cde\" | \"f\" x\n");
  Matcher m(g);
  EXPECT_EQ(m.min_bytes_to_end(), 5);
  ASSERT_TRUE(m.accept("abf"));
  EXPECT_EQ(m.min_bytes_to_end(), 3);
  ASSERT_TRUE(m.accept("cd"));
  EXPECT_EQ(m.min_bytes_to_end(), 1);
  ASSERT_TRUE(m.accept("e"));
  EXPECT_EQ(m.min_bytes_to_end(), 0);
  EXPECT_TRUE(m.must_end());
}

TEST(Gbnf, AcceptFailureLeavesStateUnchanged) {
  auto g = gbnf("root ::= \"abc\" | \"abd\"\n");
  Matcher m(g);
  ASSERT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("bx"));
  EXPECT_TRUE(m.accept("bd"));
  EXPECT_TRUE(m.can_end());
  Matcher copy = m;
  EXPECT_FALSE(copy.accept("x"));
  EXPECT_TRUE(copy.must_end());
}

TEST(Gbnf, LongInputsKeepStacksSmall) {
  // Right recursion runs at constant depth; the node pool is compacted as it goes.
  auto g = gbnf("root ::= (\"a\" | \"b\")* \"!\"\n");
  Matcher m(g);
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(m.accept(i % 3 ? "a" : "b"));
  EXPECT_LT(m.nodes().size(), 4096u);
  EXPECT_TRUE(m.accept("!"));
  EXPECT_TRUE(m.must_end());
}

TEST(Gbnf, ErrorsSayWhere) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"root ::= \"abc\n", "line 1 column 10: unterminated literal"},
      {"root ::= foo\n", "undefined rule 'foo' at line 1 column 10"},
      {"root ::= \"a\"\n\nfoo = \"b\"\n", "line 3 column 5: expected '::='"},
      {"root ::= ( \"a\" \n", "unclosed '('"},
      {"root ::= [a-\n", "line 1 column 10: unterminated character class"},
      {"root ::= \"\\q\"\n", "line 1 column 11: unknown escape"},
      {"root ::= \"a\"{3,1}\n", "max below min"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2 column 1: rule 'root' is defined twice"},
      {"other ::= \"a\"\n", "no rule 'root'"},
      {"root ::= \"a\" b ::= \"c\"\n", "missing newline"},
      {"root ::= [z-a]\n", "reversed"},
      {"root ::= \"a\" @\n", "line 1 column 14: unexpected '@'"},
  };
  for (const auto& c : cases) {
    auto g = Grammar::from_gbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_NE(g.message().find(c.expect), std::string::npos) << c.text << " -> " << g.message();
  }
}

TEST(Gbnf, LeftRecursionRefused) {
  for (const char* text : {"root ::= root \"a\" | \"b\"\n", "root ::= x\nx ::= y? \"q\" | z\nz ::= [a-z]* root\ny ::= \"y\"\n",
                           "root ::= (\"a\"?)*\n"}) {
    auto g = Grammar::from_gbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.message().find("left recursion"), std::string::npos) << g.message();
  }
  // Recursion after a byte is fine.
  auto g = gbnf("root ::= \"(\" root \")\" | \"x\"\n");
  EXPECT_TRUE(matches(g, "(((x)))"));
  EXPECT_FALSE(matches(g, "((x)"));
}

TEST(Gbnf, NeverFinishingRootRefused) {
  auto g = Grammar::from_gbnf("root ::= \"a\" root\n");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("never finish"), std::string::npos) << g.message();
}

TEST(Gbnf, HostileInputsAreBounded) {
  EXPECT_FALSE(Grammar::from_gbnf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')') + "\n").ok());
  EXPECT_FALSE(Grammar::from_gbnf("root ::= \"a\"{100001}\n").ok());
  std::string many = "root ::=";
  for (int i = 0; i < 48; ++i) many += " \"a\"{90000}";  // 4.3M elements
  auto big = Grammar::from_gbnf(many + "\n");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("too large"), std::string::npos) << big.message();
  auto huge = Grammar::from_gbnf("root ::= ((\"a\"{1000}){1000}){1000}\n");  // 10^9 bytes at least
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("never finish"), std::string::npos) << huge.message();
  // Ambiguity that doubles the stacks at each byte stays capped (the byte is then refused).
  auto amb = gbnf("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"\n");
  Matcher m(amb);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(m.accept("a"));
  EXPECT_LE(m.tops().size(), kMaxTops);
}

TEST(Gbnf, ToGbnfReturnsTheText) {
  std::string text = "root ::= \"x\"\n";
  EXPECT_EQ(gbnf(text)->to_gbnf(), text);
}

}  // namespace
}  // namespace ll3::grammar
