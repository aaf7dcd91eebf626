#pragma once
/// @file
/// The spec layer's out-of-line definitions for `MMBAL_SEPARATE_COMPILATION`: include this
/// header in exactly one translation unit of a program whose translation units all define
/// that macro (CMake: `target_compile_definitions(<target> PUBLIC MMBAL_SEPARATE_COMPILATION)`
/// on every target of the program that includes the spec layer). That unit then compiles
/// `make_balancer` — every built-in partitioner with every built-in cost — once, instead of
/// every unit that calls it. Without the macro this header only includes the spec layer's
/// algorithm header (everything is inline), so the same source builds either way.

#include <mmbal/spec/algorithm.hpp>

#if defined(MMBAL_SEPARATE_COMPILATION)
#include <mmbal/spec/impl/make_balancer.ipp>
#endif
