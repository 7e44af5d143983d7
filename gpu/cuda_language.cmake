# Turns on the CUDA language when the toolkit is there (included from the top CMakeLists.txt,
# the directory common to every target that compiles or links CUDA code). Sets
# ARL_CUDA_ENABLED. ARL_WITH_CUDA: AUTO (default: use nvcc when found), ON (fail without it),
# OFF. A GPU is not needed to build: the code is compiled for the architectures below.
set(ARL_CUDA_ENABLED OFF)
if(ARL_WITH_CUDA STREQUAL "OFF")
  message(STATUS "CUDA: disabled (ARL_WITH_CUDA=OFF)")
  return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(ARL_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ARL_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
  message(STATUS "CUDA: no CUDA compiler found; building without GPU support")
  return()
endif()
# Ampere (A100) and Hopper (H100, H200) by default; -DCMAKE_CUDA_ARCHITECTURES=... overrides.
# "native" would need a GPU at configure time, and nvcc 13 defaults to 75 when unset.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for")
endif()
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "nvcc's host compiler")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# CMake 3.25 does not know C++20 for nvcc (3.26 does); nvcc 13 accepts -std=c++20.
if(CMAKE_VERSION VERSION_LESS 3.26)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(ARL_CUDA_ENABLED ON)
message(STATUS "CUDA: ${CMAKE_CUDA_COMPILER} (${CMAKE_CUDA_COMPILER_VERSION}), "
               "architectures ${CMAKE_CUDA_ARCHITECTURES}")
