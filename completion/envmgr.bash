# bash completion for envmgr: commands, subcommands, options, env names and image names.
# Everything is asked of envmgr itself (`--help`, `ls`, `image list`), so it follows the CLI it
# completes. Installed by `make install` as share/bash-completion/completions/envmgr; in a checkout:
#   source completion/envmgr.bash

# The commands `envmgr --help` lists.
_envmgr_commands() {
    "$1" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p'
}

# The subcommands of CMD (`envmgr suite run ...`, `envmgr trace verify ...`), from its usage lines.
_envmgr_subcommands() {
    "$1" "$2" --help 2>/dev/null | sed -n "s/^\(usage:\)\{0,1\} *envmgr $2 \([a-z][a-z-]*\)\( .*\)\{0,1\}\$/\2/p"
}

_envmgr() {
    local envmgr=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[1]} words
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        words="$(_envmgr_commands "$envmgr") --help --version"
    else
        case $prev in
            --image) words=$("$envmgr" image list 2>/dev/null | awk '{print $1}') ;;
            --env) words=$("$envmgr" ls 2>/dev/null | awk 'NR > 1 {print $1}') ;;
            --from-state) words=$("$envmgr" state ls 2>/dev/null | awk 'NR > 1 {print $1}') ;;
            --accel) words="auto kvm tcg" ;;
            --guest) words="none envmgr osworld qga" ;;
            --firmware) words="bios uefi" ;;
            --network) words="none allowlist" ;;
            --format) words="png raw" ;;
            --progress) words="auto line plain" ;;
            --out|--record|--socket|--token-file|--task|--task-root|--agent|--html|--frames)
                return 0 ;; # a path: the default (file name) completion
            *)
                local subs
                subs=$(_envmgr_subcommands "$envmgr" "$cmd")
                if [[ $cur == -* ]]; then
                    words=$("$envmgr" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; echo --help)
                elif [ -n "$subs" ] && [ "$COMP_CWORD" -eq 2 ]; then
                    words=$subs
                else
                    case $cmd in
                        down|reset|screenshot|act|exec|view) [ "$COMP_CWORD" -eq 2 ] || [ "$cmd" = down ] &&
                            words=$("$envmgr" ls 2>/dev/null | awk 'NR > 1 {print $1}') ;;
                        net) [ "$COMP_CWORD" -eq 3 ] && words=$("$envmgr" ls 2>/dev/null | awk 'NR > 1 {print $1}') ;;
                        image) [ "$COMP_CWORD" -eq 3 ] && words=$("$envmgr" image list 2>/dev/null | awk '{print $1}') ;;
                        state) # save|restore ENV NAME, rm NAME: envs, then saved states
                            local sub=${COMP_WORDS[2]}
                            if [ "$COMP_CWORD" -eq 3 ] && [[ $sub == save || $sub == restore ]]; then
                                words=$("$envmgr" ls 2>/dev/null | awk 'NR > 1 {print $1}')
                            elif { [ "$COMP_CWORD" -eq 4 ] && [ "$sub" = restore ]; } ||
                                 { [ "$COMP_CWORD" -eq 3 ] && [ "$sub" = rm ]; }; then
                                words=$("$envmgr" state ls 2>/dev/null | awk 'NR > 1 {print $1}')
                            fi ;;
                    esac
                fi ;;
        esac
    fi
    [ -n "$words" ] || return 0
    local IFS=$'\n'
    # shellcheck disable=SC2207 # compgen prints one word a line
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o bashdefault -o default -F _envmgr envmgr
