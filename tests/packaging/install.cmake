# cmake -DBUILD_DIR=<dlm build> -DPREFIX=<dir> [-DCONFIG=<config>] -P install.cmake
# Installs the dlm build into a fresh PREFIX (emptied first, so no stale header can hide a missing one).
foreach(var BUILD_DIR PREFIX)
  if(NOT ${var})
    message(FATAL_ERROR "install.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install.cmake: `cmake --install ${BUILD_DIR} --prefix ${PREFIX}` failed (${rc})")
endif()
