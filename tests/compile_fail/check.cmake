# cmake -DCXX=<compiler> -DSOURCE=<file> -DINCLUDE=<dir> -DEXPECT=<text> -P check.cmake
# Passes when compiling SOURCE fails and the diagnostics contain EXPECT.
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} was rejected, but the diagnostics do not say \"${EXPECT}\":\n${err}")
endif()
message(STATUS "rejected as expected: ${EXPECT}")
