/* mkbzimage: wrap a flat 64-bit payload (entry at offset 0x200) in a
 * minimal bzImage setup header, so the bzImage loader is exercised in a
 * real VM by a test guest.   mkbzimage PAYLOAD.bin OUT */
#include <asm/bootparam.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETUP_SECTS 1

int main(int argc, char **argv)
{
	unsigned char setup[(SETUP_SECTS + 1) * 512];
	struct setup_header h;
	unsigned char *payload;
	long n;
	FILE *in, *out;

	if (argc != 3) {
		fprintf(stderr, "usage: mkbzimage PAYLOAD OUT\n");
		return 2;
	}
	in = fopen(argv[1], "rb");
	if (!in || fseek(in, 0, SEEK_END) || (n = ftell(in)) <= 0 || fseek(in, 0, SEEK_SET)) {
		perror(argv[1]);
		return 1;
	}
	payload = malloc((size_t)n);
	if (!payload || fread(payload, 1, (size_t)n, in) != (size_t)n) {
		perror(argv[1]);
		return 1;
	}
	fclose(in);
	memset(setup, 0, sizeof(setup));
	memset(&h, 0, sizeof(h));
	h.setup_sects = SETUP_SECTS;
	h.syssize = (unsigned)((n + 15) / 16);
	h.boot_flag = 0xaa55;
	h.jump = 0x66eb; /* jmp to the end of the header (0x202 + 0x66) */
	h.header = 0x53726448;
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.code32_start = 0x100000;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = 0x200000;
	h.relocatable_kernel = 1;
	h.min_alignment = 21;
	h.xloadflags = XLF_KERNEL_64;
	h.cmdline_size = 2048;
	h.pref_address = 0x1000000;
	h.init_size = (unsigned)((n + 0xfff) & ~0xfffL);
	memcpy(setup + 0x1f1, &h, sizeof(h));
	out = fopen(argv[2], "wb");
	if (!out || fwrite(setup, 1, sizeof(setup), out) != sizeof(setup) ||
	    fwrite(payload, 1, (size_t)n, out) != (size_t)n || fclose(out)) {
		perror(argv[2]);
		return 1;
	}
	free(payload);
	return 0;
}
