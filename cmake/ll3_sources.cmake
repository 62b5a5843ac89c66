# Source collection for the engine library. Files are globbed so that adding one needs no edit
# here; SIMD kernels live in one directory per instruction set and get that set's flags only
# (the binary runs anywhere; kernels are chosen at run time from the CPU's features).

function(ll3_collect_sources out)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.cpp)
  # CUDA sources and the two implementations of the device queries are chosen in CMakeLists.txt.
  list(FILTER srcs EXCLUDE REGEX "/src/kernels/cuda/|/src/backend/cuda/|/src/backend/no_cuda/")
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Sources of the parsers of untrusted input (for the sanitizer and fuzz builds): core, io, the
# tokenizer, and the server's OpenAI JSON conversion with what it calls (the sampling values'
# validation, tool-call parsing, response building), which depend on nothing above the tokenizer.
function(ll3_collect_parser_sources out)
  # The grammar compiler reads GBNF and JSON Schema text from requests: a parser too.
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/core/*.cpp ${CMAKE_SOURCE_DIR}/src/io/*.cpp
       ${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp ${CMAKE_SOURCE_DIR}/src/grammar/*.cpp)
  list(APPEND srcs ${CMAKE_SOURCE_DIR}/src/engine/sampler.cpp
       ${CMAKE_SOURCE_DIR}/src/server/openai_request.cpp ${CMAKE_SOURCE_DIR}/src/server/openai_output.cpp
       ${CMAKE_SOURCE_DIR}/src/server/tool_calls.cpp ${CMAKE_SOURCE_DIR}/src/server/json_fields.cpp
       ${CMAKE_SOURCE_DIR}/src/server/structured_output.cpp ${CMAKE_SOURCE_DIR}/src/server/anthropic_request.cpp)
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

set(LL3_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(LL3_AVX512_FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16)

set(LL3_AMX_FLAGS ${LL3_AVX512_FLAGS} -mamx-tile -mamx-bf16 -mamx-int8)

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

# The CUDA ops (nvcc compiles src/kernels/cuda/*.cu) as a library over ll3lib, and their
# benchmark; the device queries say which architectures were compiled.
function(ll3_add_cuda_targets)
  set(archs "")
  foreach(a ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "-.*" "" a "${a}")
    list(APPEND archs "sm_${a}")
  endforeach()
  list(JOIN archs " " archs)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_devices.cpp
                              TARGET_DIRECTORY ll3lib PROPERTIES COMPILE_DEFINITIONS "LL3_CUDA_ARCHS=\"${archs}\"")
  file(GLOB cuda_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/cuda/*.cu)
  add_library(ll3cuda STATIC ${cuda_srcs})
  # cuBLAS is opened at run time (kernels/cuda/gemm.cu), so only its headers are needed here.
  target_link_libraries(ll3cuda PUBLIC ll3lib ${CMAKE_DL_LIBS})
  target_include_directories(ll3cuda PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  add_executable(ll3-cuda-bench ${CMAKE_SOURCE_DIR}/bench/cuda_kernels.cpp)
  target_link_libraries(ll3-cuda-bench PRIVATE ll3cuda)
  # The GPU forward pass on the llama3.1-8b shape (ll3lib holds the runner).
  add_executable(ll3-cuda-runner-bench ${CMAKE_SOURCE_DIR}/bench/cuda_runner.cpp)
  target_link_libraries(ll3-cuda-runner-bench PRIVATE ll3lib)
endfunction()
