# Install rules and the CMake / pkg-config packages of libphoton.
#
#   cmake --install build [--prefix DIR]   headers, libphoton.so (+ SONAME link)
#                                          and libphoton.a, the photon CLI,
#                                          lib/cmake/photon/*, lib/pkgconfig/photon.pc
#   cmake --build build --target uninstall removes what the last install wrote
#
# Consumers: find_package(photon REQUIRED) gives photon::photon (shared);
# find_package(photon REQUIRED COMPONENTS static) also photon::photon_static.
# pkg-config photon (add --static for libphoton.a).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PHOTON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/photon)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/photon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/photon/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/photon)

install(TARGETS photon EXPORT photonTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS photon_static EXPORT photonStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT photonTargets NAMESPACE photon:: DESTINATION ${PHOTON_CMAKE_DIR})
install(EXPORT photonStaticTargets NAMESPACE photon:: DESTINATION ${PHOTON_CMAKE_DIR})

if(TARGET photon_cuda_objects)
  set(PHOTON_PACKAGE_HAS_CUDA ON)
else()
  set(PHOTON_PACKAGE_HAS_CUDA OFF)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/photonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/photonConfig.cmake INSTALL_DESTINATION ${PHOTON_CMAKE_DIR})
# A new minor release works for a consumer that asked for an older one of the
# same major; a new major (an incompatible ABI) never does.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/photonConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/photonConfig.cmake ${PROJECT_BINARY_DIR}/package/photonConfigVersion.cmake
        DESTINATION ${PHOTON_CMAKE_DIR})

# photon.pc is relocatable (prefix found from the .pc file's own folder), so
# `cmake --install build --prefix DIR` works for any DIR.
file(RELATIVE_PATH PHOTON_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" PHOTON_PC_TO_PREFIX "${PHOTON_PC_TO_PREFIX}")
set(PHOTON_PC_LIBS_PRIVATE "-lfmt -lsentencepiece -lpcre2-8 -licuuc -lstdc++ -lm -lpthread")
if(PHOTON_PACKAGE_HAS_CUDA)
  string(APPEND PHOTON_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart_static -ldl -lrt")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/photon.pc.in ${PROJECT_BINARY_DIR}/package/photon.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/photon.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(NOT TARGET uninstall)
  add_custom_target(uninstall
    COMMAND ${CMAKE_COMMAND} -DPHOTON_INSTALL_MANIFEST=${PROJECT_BINARY_DIR}/install_manifest.txt
            -P ${PROJECT_SOURCE_DIR}/cmake/uninstall.cmake
    COMMENT "Removing the files listed in install_manifest.txt")
endif()
