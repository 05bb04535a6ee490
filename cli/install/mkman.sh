#!/bin/sh
# mkman.sh VMM > vmm.1: the man page, one section per verb, from the
# binary's own help (`vmm --help`, `vmm VERB --help`, which docs/cli.md
# follows), so the page cannot drift from the commands.
set -eu
vmm=$1
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d 2> /dev/null || date -u +%Y-%m-%d)
version=$("$vmm" --version | cut -d' ' -f2)

# roff: a backslash is \e; a line starting with . or ' is protected by \&.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

cat <<HEAD
.TH VMM 1 "$date" "vmm $version" "User Commands"
.SH NAME
vmm \- run Linux sandboxes on KVM
.SH SYNOPSIS
.B vmm
.RB [ \-\-version ]
.RB [ \-\-help ]
.I command
.RI [ args ]
.SH DESCRIPTION
HEAD
"$vmm" --help | sed -n '/^vmm runs/p' | esc
echo '.PP'
printf '%s\n' 'Each command is described below as \fBvmm COMMAND \-\-help\fR prints it.'
echo '.SH COMMANDS'
"$vmm" --help | sed -n 's/^  \([a-z]*\)  .*/\1/p' | while read -r verb; do
	echo ".SS vmm $verb"
	echo '.nf'
	"$vmm" help "$verb" | esc
	echo '.fi'
done
cat <<'TAIL'
.SH FILES
.TP
.I PREFIX/lib/vmm/
the guest kernel (kernel/vmlinux), initramfs.cpio, rootfs.ext4 and
guest/guest-init the installed vmm uses ($VMM_LIB_DIR overrides it)
.TP
.I /run/vmm, $XDG_RUNTIME_DIR/vmm
sandbox state ($VMM_STATE_DIR overrides it)
.TP
.I ~/.local/state/vmm/images, /var/lib/vmm/images
the image store ($VMM_IMAGE_DIR overrides it)
.SH SEE ALSO
The docs/ folder of vmm's source: cli.md, api.md, images.md, snapshot.md.
TAIL
