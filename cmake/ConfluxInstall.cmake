# Install rules, the CMake package (find_package(conflux)) and the pkg-config file.
install(TARGETS conflux EXPORT confluxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/conflux DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT confluxTargets NAMESPACE conflux:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conflux)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/confluxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/confluxConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conflux)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/confluxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/confluxConfig.cmake ${PROJECT_BINARY_DIR}/confluxConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conflux)

# From PREFIX/LIBDIR/pkgconfig back up to PREFIX: one ".." per component of LIBDIR, plus one.
string(REGEX REPLACE "[^/]+" ".." CONFLUX_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
configure_file(${PROJECT_SOURCE_DIR}/cmake/conflux.pc.in ${PROJECT_BINARY_DIR}/conflux.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/conflux.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
