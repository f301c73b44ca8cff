// Compiled as C++17 by compile.cxx17_refused: the device API must stop with its own message
// saying C++20 is needed, before any error deep in its headers.
#include <gpuverbs/ib.hpp>
