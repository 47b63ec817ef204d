// Closes the region vnni_region_begin.h opened. No include guard: once per region.
#pragma GCC pop_options
