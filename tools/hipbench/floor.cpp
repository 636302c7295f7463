// Driver of floor.c (see there): prints ns per call, medians, like hipbench's rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" int floor_empty(void*);
extern "C" int floor_last_error(void*);
static double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// `f` is a lambda calling the function directly (a PLT call, as hipbench's OK(hipStreamQuery(s))).
template <class F> double median_ns(F f) {
  const int batch = 2016;
  std::vector<double> v;
  for (int r = 0; r < 11; r++) {
    double t = now_ns();
    for (int i = 0; i < batch; i++)
      if (f((void*)0x10)) std::abort();
    v.push_back((now_ns() - t) / batch);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
int main() {
  std::printf("op floor_empty %.1f\n", median_ns([](void* s) { return floor_empty(s); }));
  std::printf("op floor_last_error %.1f\n", median_ns([](void* s) { return floor_last_error(s); }));
}
