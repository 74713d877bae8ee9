# Lists the doctest cases of each suite of a test program and writes them as ctest tests (tests/CMakeLists.txt,
# dlm_test_add_programs; run after each build of the program):
#   cmake -DEXE=<program> -DSPEC=<suites file> -DOUT=<tests file> -DWORKDIR=<dir> -P discover.cmake
# SPEC has a line per suite: its name, a tab, its source files joined by commas. A case is the ctest test
# "<suite>: <case>", which runs the program on that case of those files alone (--source-file, --test-case).
# A case's name may hold any character: commas are escaped for doctest's filters, and the name is written as a
# bracket argument, so a semicolon neither splits it nor truncates it.
cmake_minimum_required(VERSION 3.25)
foreach(_var IN ITEMS EXE SPEC OUT WORKDIR)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "suites/discover.cmake: -D${_var}=... is required")
  endif()
endforeach()

# A bracket argument whose closing bracket cannot occur in `text`.
function(_bracket text out)
  set(_eq "=")
  while(text MATCHES "]${_eq}]")
    string(APPEND _eq "=")
  endwhile()
  set(${out} "[${_eq}[${text}]${_eq}]" PARENT_SCOPE)
endfunction()

file(READ "${SPEC}" _spec)
string(REPLACE ";" "\\;" _spec "${_spec}")
string(REPLACE "\n" ";" _spec "${_spec}")
set(_script "# Written by suites/discover.cmake from ${EXE}\n")
foreach(_line IN LISTS _spec)
  if(_line STREQUAL "")
    continue()
  endif()
  string(REGEX MATCH "^([^\t]+)\t(.+)$" _ "${_line}")
  set(_suite "${CMAKE_MATCH_1}")
  # Each file by its path's tail: doctest compares the filter with __FILE__, which a unity build keeps.
  string(REPLACE "," ";" _files "${CMAKE_MATCH_2}")
  set(_filters "")
  foreach(_file IN LISTS _files)
    get_filename_component(_base "${_file}" NAME)
    list(APPEND _filters "*/${_base}")
  endforeach()
  list(JOIN _filters "," _filter)
  _bracket("--source-file=${_filter}" _files_arg)
  _bracket("${EXE}" _exe)
  _bracket("${WORKDIR}" _dir)
  execute_process(COMMAND "${EXE}" "--source-file=${_filter}" --list-test-cases --no-version
                  OUTPUT_VARIABLE _listing ERROR_VARIABLE _error RESULT_VARIABLE _rc WORKING_DIRECTORY "${WORKDIR}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "suites/discover.cmake: ${EXE} --list-test-cases failed (${_rc}) for ${_suite}:\n${_listing}${_error}")
  endif()
  string(REPLACE ";" "<semicolon>" _listing "${_listing}")
  string(REPLACE "\n" ";" _listing "${_listing}")
  set(_suite_count 0)
  foreach(_case IN LISTS _listing)
    if(_case STREQUAL "" OR _case MATCHES "^===+$" OR _case MATCHES "^\\[doctest\\] ")
      continue()
    endif()
    string(REPLACE "<semicolon>" ";" _case "${_case}")
    string(REPLACE "," "\\," _filter_case "${_case}")
    _bracket("${_suite}: ${_case}" _name)
    _bracket("--test-case=${_filter_case}" _arg)
    string(APPEND _script "add_test(${_name} ${_exe} ${_files_arg} ${_arg})\n"
                          "set_tests_properties(${_name} PROPERTIES WORKING_DIRECTORY ${_dir})\n")
    math(EXPR _suite_count "${_suite_count} + 1")
  endforeach()
  if(_suite_count EQUAL 0)
    message(FATAL_ERROR "suites/discover.cmake: ${EXE} lists no case in ${_filter} (suite ${_suite})")
  endif()
endforeach()
file(WRITE "${OUT}" "${_script}")
