/*
 * tests/wine/bcryptprimitives.c: ProcessPrng for Wine 8.0 (Debian 12), which lacks
 * bcryptprimitives.dll. Rust's standard library on Windows imports ProcessPrng from it (for
 * HashMap seeds and random temporary names), so without this DLL no Rust test binary starts
 * under that Wine. Test infrastructure only: scripts/test-other-systems.sh builds it with MinGW
 * and puts it beside the test binaries; nothing shipped loads it, and real Windows (8 and later)
 * has the real DLL. Wine 9 brings its own.
 *
 * ProcessPrng fills the buffer from the system's generator: here RtlGenRandom (exported as
 * SystemFunction036 by advapi32), which Wine implements.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG n = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}
