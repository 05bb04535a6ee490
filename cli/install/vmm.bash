# bash completion for vmm: its commands, then sandbox names (vmm ls -q)
# and files.
_vmm() {
	local cur=${COMP_WORDS[COMP_CWORD]} verbs
	if [ "$COMP_CWORD" -eq 1 ]; then
		verbs=$(vmm --help 2> /dev/null | sed -n 's/^  \([a-z]*\)  .*/\1/p')
		COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
		return
	fi
	case $cur in
	-*)
		COMPREPLY=($(compgen -W "$(vmm help "${COMP_WORDS[1]}" 2> /dev/null |
			grep -o -- '--\?[a-zA-Z][a-zA-Z-]*' | sort -u)" -- "$cur"))
		return ;;
	esac
	case ${COMP_WORDS[1]} in
	exec | cp | stop | rm | inspect | logs | pause | resume | snapshot | top | attach | kill | watch | mcp | token | start)
		COMPREPLY=($(compgen -W "$(vmm ls -q 2> /dev/null)" -- "$cur") $(compgen -f -- "$cur")) ;;
	*)
		COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}
complete -F _vmm vmm
