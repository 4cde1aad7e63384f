/*
 * bcryptprimitives.dll for Wine releases that lack it (Wine 8.0, Debian
 * 12's): the Go runtime (1.24 and later) loads it from system32 at start
 * and takes its random bytes from ProcessPrng, which Windows 10 and later
 * export there. This one forwards to BCryptGenRandom with the system's
 * preferred generator, and to RtlGenRandom (advapi32's SystemFunction036)
 * should that fail. .ci/wine-setup builds it with MinGW-w64:
 *
 *	x86_64-w64-mingw32-gcc -shared -O2 -s -o bcryptprimitives.dll
 *		bcryptprimitives.c bcryptprimitives.def -lbcrypt -ladvapi32
 */
#include <windows.h>
#include <bcrypt.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* ProcessPrng fills data with cb random bytes and returns TRUE. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T cb)
{
	while (cb > 0) {
		ULONG n = cb > 0x40000000 ? 0x40000000 : (ULONG)cb;
		if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG)) &&
		    !SystemFunction036(data, n))
			return FALSE;
		data += n;
		cb -= n;
	}
	return TRUE;
}
