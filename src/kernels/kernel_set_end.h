// Closes what kernel_set_begin.h opened.
#if GATEDLM_KSET_ID != 0
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
#undef GATEDLM_KSET
#undef GATEDLM_KSET_AVX2
#undef GATEDLM_KSET_AVX512
