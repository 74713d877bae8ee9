# Packaging tests: three consumer projects (tests/packaging/*) build and run a small decode
# (tests/packaging/consumer.cpp) against
#   find_package     — this build installed into a fresh prefix (fixture "dlm_install"); dlm::dlm + dlm::cpu
#   add_subdirectory — dlm's source directory; dlm::dlm only
#   fetchcontent     — FetchContent with SOURCE_DIR at dlm's source directory (no network); dlm::dlm + dlm::cpu
# each with this build's generator, compiler, flags and configuration. Label "packaging":
# `ctest -LE packaging` skips them.

set(_pkg_src ${CMAKE_CURRENT_SOURCE_DIR}/packaging)
set(_pkg_bin ${CMAKE_CURRENT_BINARY_DIR}/packaging)
set(_pkg_prefix ${_pkg_bin}/prefix)

get_property(_pkg_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
if(_pkg_multi_config)
  set(_pkg_config_args --build-config $<CONFIG>)
  set(_pkg_install_config -DCONFIG=$<CONFIG>)
else()
  set(_pkg_config_args)
  set(_pkg_install_config)
endif()

# dlm_consumer_test(<name> <cache args>...): configure, build and run tests/packaging/<name>.
function(dlm_consumer_test name)
  set(generator_args --build-generator ${CMAKE_GENERATOR})
  if(CMAKE_GENERATOR_PLATFORM)
    list(APPEND generator_args --build-generator-platform ${CMAKE_GENERATOR_PLATFORM})
  endif()
  if(CMAKE_GENERATOR_TOOLSET)
    list(APPEND generator_args --build-generator-toolset ${CMAKE_GENERATOR_TOOLSET})
  endif()
  if(CMAKE_MAKE_PROGRAM)
    list(APPEND generator_args --build-makeprogram ${CMAKE_MAKE_PROGRAM})
  endif()
  set(build_type)
  if(NOT _pkg_multi_config)
    set(build_type -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE})
  endif()
  add_test(NAME "packaging: ${name}"
           COMMAND ${CMAKE_CTEST_COMMAND} --build-and-test ${_pkg_src}/${name} ${_pkg_bin}/${name}
                   ${generator_args} ${_pkg_config_args} --build-target dlm_consumer
                   --build-options -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
                                   "-DCMAKE_CXX_FLAGS=${CMAKE_CXX_FLAGS}"
                                   "-DCMAKE_EXE_LINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
                                   ${build_type} ${ARGN}
                   --test-command dlm_consumer)
  set_tests_properties("packaging: ${name}" PROPERTIES LABELS packaging TIMEOUT 600)
endfunction()

dlm_consumer_test(add_subdirectory -DDLM_SOURCE_DIR=${PROJECT_SOURCE_DIR})
dlm_consumer_test(fetchcontent -DDLM_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DDLM_CONSUMER_CPU=${DLM_HAVE_CPU})

if(DLM_INSTALL)
  add_test(NAME "packaging: install"
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DPREFIX=${_pkg_prefix} ${_pkg_install_config}
                   -P ${_pkg_src}/install.cmake)
  set_tests_properties("packaging: install" PROPERTIES FIXTURES_SETUP dlm_install LABELS packaging)
  dlm_consumer_test(find_package -DCMAKE_PREFIX_PATH=${_pkg_prefix} -DDLM_EXPECTED_PREFIX=${_pkg_prefix}
                                 -DDLM_CONSUMER_CPU=${DLM_HAVE_CPU})
  set_tests_properties("packaging: find_package" PROPERTIES FIXTURES_REQUIRED dlm_install)
endif()
