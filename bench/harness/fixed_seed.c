/* Preloaded into a server run under callgrind (harness.callgrind): Redis seeds random()
 * (skiplist levels) from the clock and its dict hash seed from /dev/urandom at start, and
 * the shape of a sorted set or a dict then moves a command's instructions by several
 * percent from one start to the next. With both fixed, servers given the same commands
 * build the same structures, and what differs between them is the module. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srandom(unsigned seed) {
    (void)seed;
    void (*real)(unsigned) = (void (*)(unsigned))dlsym(RTLD_NEXT, "srandom");
    real(1);
}

void srand(unsigned seed) {
    (void)seed;
    void (*real)(unsigned) = (void (*)(unsigned))dlsym(RTLD_NEXT, "srand");
    real(1);
}

static FILE *open_fixed(const char *name, const char *path, const char *mode) {
    FILE *(*real)(const char *, const char *) = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, name);
    return real(strcmp(path, "/dev/urandom") == 0 ? "/dev/zero" : path, mode);
}

FILE *fopen(const char *path, const char *mode) { return open_fixed("fopen", path, mode); }
FILE *fopen64(const char *path, const char *mode) { return open_fixed("fopen64", path, mode); }
