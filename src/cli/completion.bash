# bash completion for reverie (installed by meson as
# $datadir/bash-completion/completions/reverie).
#
# Commands, options, optimization names and their parameters come from the
# program itself (reverie --help, reverie COMMAND --help-all, reverie
# plugins), so the completion knows what the installed reverie knows.

_reverie_commands() {
    "$1" --help 2>/dev/null | awk '/^commands:/ { listing = 1; next } listing && /^  [a-z]/ { print $1 } listing && /^$/ { exit }'
}

_reverie_options() {
    "$1" "$2" --help-all 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u
}

# Optimization names: the lines of `reverie plugins` that are not indented.
_reverie_plugins() {
    "$1" plugins 2>/dev/null | awk '/^[a-z]/ { print $1 }'
}

_reverie_params() {
    "$1" plugins "$2" --csv 2>/dev/null | awk -F, 'NR > 1 && $3 != "" { print $3 }'
}

_reverie() {
    local program=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local IFS=$'\n'
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$(_reverie_commands "$program")"$'\n'"--help"$'\n'"--version" -- "$cur"))
        return
    fi
    local command=${COMP_WORDS[1]}
    case $prev in
        --opt)
            if [[ $cur == *:* ]]; then
                # NAME:k=v,k2= - offer the plugin's parameters after the last ':' or ','
                local name=${cur%%:*} head=${cur%[:,]*} sep
                sep=${cur:${#head}:1}
                COMPREPLY=($(compgen -P "$head$sep" -S = -W "$(_reverie_params "$program" "$name")" -- "${cur##*[:,]}"))
                compopt -o nospace 2>/dev/null
            else
                COMPREPLY=($(compgen -W "$(_reverie_plugins "$program")" -- "$cur"))
            fi
            return ;;
        --vary)
            if [[ $cur == *.* ]]; then
                local name=${cur%%.*}
                COMPREPLY=($(compgen -P "$name." -S = -W "$(_reverie_params "$program" "$name")" -- "${cur#*.}"))
            else
                COMPREPLY=($(compgen -S . -W "$(_reverie_plugins "$program")" -- "$cur"))
            fi
            compopt -o nospace 2>/dev/null
            return ;;
        -o|--output|--timeline|--plot|--variants)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_reverie_options "$program" "$command")" -- "$cur"))
    elif [[ $command == plugins ]]; then
        COMPREPLY=($(compgen -W "$(_reverie_plugins "$program")" -- "$cur"))
    else
        # traces, saved graphs and folders of ranks
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}

complete -o filenames -F _reverie reverie
