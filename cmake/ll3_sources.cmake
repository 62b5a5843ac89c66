# Source collection for the engine library. Files are globbed so that adding one needs no edit
# here; SIMD kernels live in one directory per instruction set and get that set's flags only
# (the binary runs anywhere; kernels are chosen at run time from the CPU's features).

function(ll3_collect_sources out)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.cpp)
  list(FILTER srcs EXCLUDE REGEX "/src/kernels/cuda/")
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Sources of the parsers of untrusted input (for the sanitizer and fuzz builds): core, io, the
# tokenizer, and the server's OpenAI JSON conversion with what it calls (the sampling values'
# validation, tool-call parsing, response building), which depend on nothing above the tokenizer.
function(ll3_collect_parser_sources out)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/core/*.cpp ${CMAKE_SOURCE_DIR}/src/io/*.cpp
       ${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp)
  list(APPEND srcs ${CMAKE_SOURCE_DIR}/src/engine/sampler.cpp
       ${CMAKE_SOURCE_DIR}/src/server/openai_request.cpp ${CMAKE_SOURCE_DIR}/src/server/openai_output.cpp
       ${CMAKE_SOURCE_DIR}/src/server/tool_calls.cpp)
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

set(LL3_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(LL3_AVX512_FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16)

set(LL3_AMX_FLAGS ${LL3_AVX512_FLAGS} -mamx-tile -mamx-bf16)

# GCC 12's avx512fintrin.h builds the unused merge operand of many intrinsics from
# _mm512_undefined_*() ("__m512i __Y = __Y;"), which -Wall reports as (maybe) uninitialized at
# every inlined call (GCC PR 105593): hundreds of reports from the compiler's own header, none
# about this code. Only for those compilers and only on the AVX-512 and AMX sources; clang's
# -Wall still checks them for uninitialized uses.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(LL3_GCC_AVX512_HEADER_WARNINGS -Wno-uninitialized -Wno-maybe-uninitialized)
  list(APPEND LL3_AVX512_FLAGS ${LL3_GCC_AVX512_HEADER_WARNINGS})
  list(APPEND LL3_AMX_FLAGS ${LL3_GCC_AVX512_HEADER_WARNINGS})
endif()

function(ll3_set_isa_flags srcs)
  foreach(f ${srcs})
    if(f MATCHES "/kernels/cpu/amx/")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${LL3_AMX_FLAGS}")
    elseif(f MATCHES "/kernels/cpu/avx512/")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${LL3_AVX512_FLAGS}")
    elseif(f MATCHES "/kernels/cpu/avx2/")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${LL3_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()
