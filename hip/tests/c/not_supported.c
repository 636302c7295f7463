/* Every function kfdrt exports as not implemented (argv[2..]) is found by dlsym in the
 * library argv[1] and returns hipErrorNotSupported, which hipGetLastError then reports
 * (and clears). Called without arguments: the functions read none. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  int (*last)(void) = (int (*)(void))dlsym(lib, "hipGetLastError");
  if (!last) return 1;
  int bad = 0;
  for (int i = 2; i < argc; i++) {
    int (*f)(void) = (int (*)(void))dlsym(lib, argv[i]);
    int r = f ? f() : -1;
    int l = last();
    int again = last();
    if (r != 801 || l != 801 || again != 0) {
      printf("%s: %s returned %d, last error %d then %d\n", argv[i], f ? "" : "(missing)", r, l, again);
      bad++;
    }
  }
  printf("%d functions, %d bad\n", argc - 2, bad);
  return bad != 0;
}
