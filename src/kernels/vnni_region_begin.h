// Opens a region of a per-set kernel source whose code may use vpdpbusd: GCC's target pragma
// adds AVX512-VNNI in the avx512 set, AVX-VNNI in the avx2 set (include it only under
// !defined(__clang__), which has no such region). Close it with vnni_region_end.h. What is
// compiled here runs only where int8_vnni_runnable() finds the extension. No include guard:
// once per region.
#ifndef GATEDLM_KSET
#error "vnni_region_begin.h belongs to a kernel set: include kernel_set_begin.h first"
#endif
#pragma GCC push_options
#if GATEDLM_KSET_AVX512
#pragma GCC target("avx512vnni")
#else
#pragma GCC target("avxvnni")
#endif
