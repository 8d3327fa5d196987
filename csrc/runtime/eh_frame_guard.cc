#include "runtime/eh_frame_guard.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__linux__) && defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
#define TORCH_TPU_EH_GUARD 1
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace torch_tpu::runtime {
namespace {

std::atomic<int64_t> n_redirected{0}, n_registered{0}, n_deregistered{0}, n_dropped{0};

#ifdef TORCH_TPU_EH_GUARD
using FrameFn = void (*)(void*);
using MunmapFn = int (*)(void*, size_t);
// The functions the plugin's GOT held before patching (libgcc's and libc's).
std::atomic<void*> real_register{nullptr}, real_deregister{nullptr}, real_munmap{nullptr};
template <class F>
F real(const std::atomic<void*>& fn) {
  return reinterpret_cast<F>(fn.load());
}

// Never destroyed: the plugin may unmap code during exit.
std::mutex& mu() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<uintptr_t>& live() {
  static auto* s = new std::set<uintptr_t>;
  return *s;
}

// For the self test, run before (or without) any patched library.
void resolve_reals() {
  void* gcc = ::dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
  if (gcc == nullptr) throw std::runtime_error("eh_frame guard: libgcc_s.so.1 is not loadable");
  const std::pair<std::atomic<void*>*, void*> found[] = {{&real_munmap, ::dlsym(RTLD_DEFAULT, "munmap")},
                                                         {&real_register, ::dlsym(gcc, "__register_frame")},
                                                         {&real_deregister, ::dlsym(gcc, "__deregister_frame")}};
  for (auto [fn, addr] : found) {
    void* expected = nullptr;
    fn->compare_exchange_strong(expected, addr);
  }
}

// libgcc ignores an empty table (one that starts with its zero terminator),
// in both calls; so does the guard.
bool empty_table(void* begin) { return *static_cast<const uint32_t*>(begin) == 0; }

void hooked_register(void* begin) {
  std::lock_guard<std::mutex> lock(mu());
  if (!empty_table(begin)) {
    live().insert(reinterpret_cast<uintptr_t>(begin));
    ++n_registered;
  }
  real<FrameFn>(real_register)(begin);
}

void hooked_deregister(void* begin) {
  std::lock_guard<std::mutex> lock(mu());
  // Not live: already dropped when its memory was unmapped (calling libgcc
  // again would abort on an unknown table, or read the unmapped memory).
  if (live().erase(reinterpret_cast<uintptr_t>(begin)) == 0) return;
  ++n_deregistered;
  real<FrameFn>(real_deregister)(begin);
}

int hooked_munmap(void* addr, size_t len) {
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  {
    std::lock_guard<std::mutex> lock(mu());
    auto& s = live();
    for (auto it = s.lower_bound(lo); it != s.end() && *it < lo + len;) {
      real<FrameFn>(real_deregister)(reinterpret_cast<void*>(*it));  // still mapped here
      ++n_dropped;
      it = s.erase(it);
    }
  }
  return real<MunmapFn>(real_munmap)(addr, len);
}

// The three imports the guard redirects, and where it keeps the originals.
struct Import {
  const char* name;
  void* hook;
  std::atomic<void*>* real;
};
const Import kImports[] = {{"__register_frame", reinterpret_cast<void*>(&hooked_register), &real_register},
                           {"__deregister_frame", reinterpret_cast<void*>(&hooked_deregister), &real_deregister},
                           {"munmap", reinterpret_cast<void*>(&hooked_munmap), &real_munmap}};

// The protection of the mapping that holds `p`, from /proc/self/maps.
int protection_of(uintptr_t p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &a, &b, perms) != 3) continue;
    if (p < a || p >= b) continue;
    return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
  }
  return -1;
}

bool write_slot(void** slot, void* value) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
  const int prot = protection_of(at);
  if (prot < 0) return false;
  void* start = reinterpret_cast<void*>(at & ~static_cast<uintptr_t>(page - 1));
  if (!(prot & PROT_WRITE) && ::mprotect(start, page, prot | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  if (!(prot & PROT_WRITE)) ::mprotect(start, page, prot);  // RELRO again
  return true;
}

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#else
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#endif
#endif  // TORCH_TPU_EH_GUARD

}  // namespace

int guard_eh_frames(void* dl_handle) {
#ifdef TORCH_TPU_EH_GUARD
  link_map* lm = nullptr;
  if (dl_handle == nullptr || ::dlinfo(dl_handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr) return 0;
  const uintptr_t base = lm->l_addr;
  // glibc has already relocated these entries on x86_64 and aarch64; add the
  // base only to one that still looks like a file offset.
  auto at = [&](ElfW(Addr) p) { return p < base ? p + base : p; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela) * tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        sizes[0] = d->d_un.d_val;
        break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        sizes[1] = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return 0;
  int patched = 0;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela) & r = tables[t][i];
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != kJumpSlot && type != kGlobDat) continue;
      const char* name = strtab + symtab[ELF64_R_SYM(r.r_info)].st_name;
      const Import* imp = nullptr;
      for (const Import& m : kImports)
        if (std::strcmp(name, m.name) == 0) imp = &m;
      if (imp == nullptr) continue;
      auto** slot = reinterpret_cast<void**>(base + r.r_offset);
      void* original = *slot;
      if (original == imp->hook || original == nullptr) continue;
      // The first original seen is the real function; every library
      // resolves these three to the same libgcc and libc.
      void* expected = nullptr;
      imp->real->compare_exchange_strong(expected, original);
      void* hook = imp->hook;
      if (write_slot(slot, hook)) ++patched;
    }
  }
  n_redirected += patched;
  return patched;
#else
  (void)dl_handle;
  return 0;
#endif
}

EhFrameGuardStats eh_frame_guard_stats() {
  EhFrameGuardStats s;
  s.redirected = n_redirected.load();
  s.registered = n_registered.load();
  s.deregistered = n_deregistered.load();
  s.dropped_at_unmap = n_dropped.load();
  return s;
}

void eh_frame_guard_self_test() {
#ifdef TORCH_TPU_EH_GUARD
  resolve_reals();
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("eh_frame guard self test: mmap failed");
  // One CIE (length 12: id 0, version 1, no augmentation, code alignment 1,
  // data alignment -8, return address register 16, three DW_CFA_nop) and
  // the zero terminator. libgcc skips CIEs while it classifies a table,
  // but it must read this one to do so.
  const unsigned char table[] = {12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0x78, 16, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(p, table, sizeof table);
  hooked_register(p);
  hooked_munmap(p, page);
#else
  throw std::runtime_error("eh_frame guard: not available on this platform");
#endif
}

}  // namespace torch_tpu::runtime
