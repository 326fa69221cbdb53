/* dlclose that keeps the library loaded: preloaded (LD_PRELOAD) into the sanitizer build's
** MPI runs by tests/long/long_dist_asan.sh. Open MPI 4.1 unloads its components (mca_*.so)
** in MPI_Finalize, before LeakSanitizer looks at the heap at exit, so the leaks it reports
** from them have no module to name and no suppression can match them; with the components
** still mapped, tests/lsan_openmpi.supp suppresses Open MPI's own and nothing of maskd's. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
