// defines: sf::cuda::DlLibrary — a library of NVIDIA's loaded at run time (cuDNN, NCCL, cuFile):
// the path from an environment variable, else a soname the loader finds, and its entry points
// resolved by name. Nothing links against these libraries or needs their headers.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>

namespace sf::cuda {

struct DlLibrary {
  void* lib = nullptr;
  std::string path, error;  // error: the first thing missing (the library, a symbol)

  // Opens $env_var where set and non-empty, else `soname` (RTLD_LOCAL: the process's other
  // copies stay apart). Never unloaded: these libraries keep threads and kernels alive.
  DlLibrary(const char* env_var, const char* soname) {
    const char* env = std::getenv(env_var);
    path = env && *env ? env : soname;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      error = "dlopen(" + path + "): " + (e ? e : "not found");
    }
  }
  // fn = the symbol `name`; a required one that is missing sets `error` (the first such).
  template <typename F>
  void get(F& fn, const char* name, bool required = true) {
    fn = lib ? reinterpret_cast<std::remove_reference_t<F>>(dlsym(lib, name)) : nullptr;
    if (!fn && required && error.empty()) error = path + " lacks " + name;
  }
};

}  // namespace sf::cuda
