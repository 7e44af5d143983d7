# The NCCL reference backend (--backend nccl, algorithms nccl-ring and nccl-tree): included by
# gpu/CMakeLists.txt once a CUDA toolkit was found. NCCL has no CMake package: its header is
# looked for beside the toolkit's. Only the header: the library is not linked but opened when a
# program runs (gpu/nccl_loader.h, in arl_gpu; gpu/nccl_api.h resolves its functions), so that
# the worker starts, and runs every other backend, where NCCL is absent. Its code is plain C++
# on CUDA's runtime API and NCCL's host API, and one kernel of its own (gpu_timer.cu: reading
# the GPU's global timer for NCCL's profiler events). It also holds NCCL's profiler plugin
# (nccl_profiler.cpp), whose table `ncclProfiler_v5` the worker exports
# (workers/CMakeLists.txt). Without nccl.h the build goes on without it and says so.
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "arl_nccl: no CUDA toolkit libraries found; building without --backend nccl")
  return()
endif()
find_path(ARL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
if(NOT ARL_NCCL_INCLUDE_DIR)
  if(ARL_WITH_CUDA STREQUAL "ON")
    message(WARNING "arl_nccl: NCCL's header nccl.h not found beside CUDA; no --backend nccl")
  else()
    message(STATUS "arl_nccl: nccl.h not found beside CUDA; building without --backend nccl")
  endif()
  return()
endif()
message(STATUS "arl_nccl: NCCL's header in ${ARL_NCCL_INCLUDE_DIR}; the library is opened at run time")

add_library(arl_nccl STATIC
  ${CMAKE_CURRENT_LIST_DIR}/nccl_api.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_timer.cu
  ${CMAKE_CURRENT_LIST_DIR}/nccl_library.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_profiler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_register.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_token.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_tolerance.cpp)
# Headers are included as "gpu/nccl_....h".
target_include_directories(arl_nccl PUBLIC ${PROJECT_SOURCE_DIR})
target_include_directories(arl_nccl SYSTEM PRIVATE ${ARL_NCCL_INCLUDE_DIR})
target_link_libraries(arl_nccl
  PUBLIC arl_engine
  PRIVATE arl_gpu arl_warnings CUDA::cudart_static ${CMAKE_DL_LIBS})
# The worker links it and registers it; the lab and its tests learn from arl_engine that the
# worker has it (backend/registry.cpp, ARL_GPU_BACKENDS).
list(APPEND ARL_GPU_BACKEND_NAMES nccl)
