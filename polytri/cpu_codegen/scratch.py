"""Per-thread scratch buffers for the panels of packed contraction nests (:mod:`.packing`).

Each nest allocated its panels (up to 512 KiB of ``R``, and ``L`` packed whole) on entry and freed them on
exit.  glibc served those from the heap and, once the freed top of the heap passed its trim threshold,
gave the pages back to the system (``brk``), so the next call faulted them in again, zeroed: MobileNet's
float32 call spent about 8% of its samples in the kernel's page faults and ``brk`` (perf, one thread).

``pt__scratch(slot, bytes)`` returns the calling thread's buffer number ``slot`` (one per panel kind),
grown when a nest needs more and otherwise kept from call to call; a thread's buffers are freed when it
exits (a POSIX thread-specific key with a destructor).  A thread runs one nest at a time, so its buffers
are never in use twice.  What a thread keeps is bounded by the panels' sizes: one panel of ``R`` (at most
``KC x NC``, as large as the library's nests need), one ``MR x KC`` of ``L`` and one ``L`` packed whole
(at most :data:`.blocking.WHOLE_L_BYTES`), per kernel library: each library keeps its own, so a process
keeps at most about 1 MiB per thread and library that packs (a buffer shared by the libraries would bound
it by the threads alone; not done).  ``NULL`` (no memory) makes the nest take its fallback loops.
"""

from __future__ import annotations

SLOTS = {"right": 0, "left": 1, "whole_left": 2}
"""The buffer of each panel kind."""

SCRATCH_HELPERS = """\
#include <pthread.h>
/* The calling thread's scratch buffers, kept from call to call (cpu_codegen/scratch.py). */
struct pt__scratch_set { void *buf[3]; size_t cap[3]; };
static pthread_key_t pt__scratch_key;
static pthread_once_t pt__scratch_once = PTHREAD_ONCE_INIT;
static int pt__scratch_ok;
static void pt__scratch_free(void *p) {
  struct pt__scratch_set *s = p;
  for (int i = 0; i < 3; i++) free(s->buf[i]);
  free(s);
}
static void pt__scratch_init(void) { pt__scratch_ok = pthread_key_create(&pt__scratch_key, pt__scratch_free) == 0; }
/* unloaded: no thread may run the destructor of a library that is gone */
__attribute__((destructor)) static void pt__scratch_fini(void) {
  if (pt__scratch_ok) pthread_key_delete(pt__scratch_key);
}
/* malloc: within a call, no other pointer reaches the buffer returned (as of aligned_alloc's), so gcc
   vectorizes the packing loops that store to it without checking for overlap (without the attribute a
   ResNet convolution's packing ran one element at a time) */
__attribute__((malloc)) PT_HELPER void *pt__scratch(int slot, size_t bytes) {
  pthread_once(&pt__scratch_once, pt__scratch_init);
  if (!pt__scratch_ok) return NULL;
  struct pt__scratch_set *s = pthread_getspecific(pt__scratch_key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s || pthread_setspecific(pt__scratch_key, s) != 0) { free(s); return NULL; }
  }
  if (bytes > s->cap[slot]) {
    free(s->buf[slot]);
    s->buf[slot] = aligned_alloc(64, (bytes + 63) / 64 * 64);
    s->cap[slot] = s->buf[slot] ? bytes : 0;
  }
  return s->buf[slot];
}
"""

__all__ = ["SCRATCH_HELPERS", "SLOTS"]
