// dlm/cpu/kernels/target_end.inl — ends the region target_begin.inl opened.
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
#undef DLM_KERNEL_TARGET
