# Generated from the code by `cargo run -p agentd-docgen`; do not edit by hand.
_agentd() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="agentd"
                ;;
            agentd,acp)
                cmd="agentd__subcmd__acp"
                ;;
            agentd,completions)
                cmd="agentd__subcmd__completions"
                ;;
            agentd,config)
                cmd="agentd__subcmd__config"
                ;;
            agentd,demo)
                cmd="agentd__subcmd__demo"
                ;;
            agentd,exec)
                cmd="agentd__subcmd__exec"
                ;;
            agentd,help)
                cmd="agentd__subcmd__help"
                ;;
            agentd,man)
                cmd="agentd__subcmd__man"
                ;;
            agentd,probe)
                cmd="agentd__subcmd__probe"
                ;;
            agentd,run)
                cmd="agentd__subcmd__run"
                ;;
            agentd,sessions)
                cmd="agentd__subcmd__sessions"
                ;;
            agentd__subcmd__config,help)
                cmd="agentd__subcmd__config__subcmd__help"
                ;;
            agentd__subcmd__config,show)
                cmd="agentd__subcmd__config__subcmd__show"
                ;;
            agentd__subcmd__config__subcmd__help,help)
                cmd="agentd__subcmd__config__subcmd__help__subcmd__help"
                ;;
            agentd__subcmd__config__subcmd__help,show)
                cmd="agentd__subcmd__config__subcmd__help__subcmd__show"
                ;;
            agentd__subcmd__help,acp)
                cmd="agentd__subcmd__help__subcmd__acp"
                ;;
            agentd__subcmd__help,completions)
                cmd="agentd__subcmd__help__subcmd__completions"
                ;;
            agentd__subcmd__help,config)
                cmd="agentd__subcmd__help__subcmd__config"
                ;;
            agentd__subcmd__help,demo)
                cmd="agentd__subcmd__help__subcmd__demo"
                ;;
            agentd__subcmd__help,exec)
                cmd="agentd__subcmd__help__subcmd__exec"
                ;;
            agentd__subcmd__help,help)
                cmd="agentd__subcmd__help__subcmd__help"
                ;;
            agentd__subcmd__help,man)
                cmd="agentd__subcmd__help__subcmd__man"
                ;;
            agentd__subcmd__help,probe)
                cmd="agentd__subcmd__help__subcmd__probe"
                ;;
            agentd__subcmd__help,run)
                cmd="agentd__subcmd__help__subcmd__run"
                ;;
            agentd__subcmd__help,sessions)
                cmd="agentd__subcmd__help__subcmd__sessions"
                ;;
            agentd__subcmd__help__subcmd__config,show)
                cmd="agentd__subcmd__help__subcmd__config__subcmd__show"
                ;;
            agentd__subcmd__help__subcmd__sessions,audit)
                cmd="agentd__subcmd__help__subcmd__sessions__subcmd__audit"
                ;;
            agentd__subcmd__help__subcmd__sessions,list)
                cmd="agentd__subcmd__help__subcmd__sessions__subcmd__list"
                ;;
            agentd__subcmd__help__subcmd__sessions,show)
                cmd="agentd__subcmd__help__subcmd__sessions__subcmd__show"
                ;;
            agentd__subcmd__help__subcmd__sessions,undo)
                cmd="agentd__subcmd__help__subcmd__sessions__subcmd__undo"
                ;;
            agentd__subcmd__sessions,audit)
                cmd="agentd__subcmd__sessions__subcmd__audit"
                ;;
            agentd__subcmd__sessions,help)
                cmd="agentd__subcmd__sessions__subcmd__help"
                ;;
            agentd__subcmd__sessions,list)
                cmd="agentd__subcmd__sessions__subcmd__list"
                ;;
            agentd__subcmd__sessions,show)
                cmd="agentd__subcmd__sessions__subcmd__show"
                ;;
            agentd__subcmd__sessions,undo)
                cmd="agentd__subcmd__sessions__subcmd__undo"
                ;;
            agentd__subcmd__sessions__subcmd__help,audit)
                cmd="agentd__subcmd__sessions__subcmd__help__subcmd__audit"
                ;;
            agentd__subcmd__sessions__subcmd__help,help)
                cmd="agentd__subcmd__sessions__subcmd__help__subcmd__help"
                ;;
            agentd__subcmd__sessions__subcmd__help,list)
                cmd="agentd__subcmd__sessions__subcmd__help__subcmd__list"
                ;;
            agentd__subcmd__sessions__subcmd__help,show)
                cmd="agentd__subcmd__sessions__subcmd__help__subcmd__show"
                ;;
            agentd__subcmd__sessions__subcmd__help,undo)
                cmd="agentd__subcmd__sessions__subcmd__help__subcmd__undo"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        agentd)
            opts="-h -V --help --version run config sessions acp exec demo probe completions man help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__acp)
            opts="-h --helper --helper-socket --helper-ceiling --config --state-dir --model-script --sandbox-mode --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox-mode)
                    COMPREPLY=($(compgen -W "read-only workspace-write danger-full-access" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__completions)
            opts="-h --help bash zsh fish"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__config)
            opts="-h --help show help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__config__subcmd__help)
            opts="show help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__config__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__config__subcmd__help__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__config__subcmd__show)
            opts="-h --helper --helper-socket --helper-ceiling --config --state-dir --model-script --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__demo)
            opts="-h --helper --helper-socket --helper-ceiling --config --sandbox-mode --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox-mode)
                    COMPREPLY=($(compgen -W "read-only workspace-write danger-full-access" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__exec)
            opts="-h --helper --helper-socket --helper-ceiling --config --state-dir --model-script --sandbox-mode --json --cwd --approve --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox-mode)
                    COMPREPLY=($(compgen -W "read-only workspace-write danger-full-access" -- "${cur}"))
                    return 0
                    ;;
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --approve)
                    COMPREPLY=($(compgen -W "none escalations all" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help)
            opts="run config sessions acp exec demo probe completions man help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__acp)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__config)
            opts="show"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__config__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__demo)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__exec)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__man)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__probe)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__sessions)
            opts="list show audit undo"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__sessions__subcmd__audit)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__sessions__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__sessions__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__help__subcmd__sessions__subcmd__undo)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__man)
            opts="-h --dir --help acp completions config config-show demo exec man probe run sessions sessions-audit sessions-list sessions-show sessions-undo"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__probe)
            opts="-h --helper --helper-socket --helper-ceiling --config --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__run)
            opts="-h --mode --workspace --cwd --network --backend --timeout --writable-root --protect --deny-read --local-binding --unix-socket --allow-domain --deny-domain --allow-local-addresses --max-processes --max-file-size --max-address-space --max-memory --env --json --helper --helper-socket --helper-ceiling --config --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --mode)
                    COMPREPLY=($(compgen -W "read-only workspace-write danger-full-access" -- "${cur}"))
                    return 0
                    ;;
                --workspace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --network)
                    COMPREPLY=($(compgen -W "deny allow" -- "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -W "auto bwrap landlock seatbelt namespaces" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --writable-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --protect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --unix-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-domain)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny-domain)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-processes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-file-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-address-space)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-memory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions)
            opts="-h --help list show audit undo help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__audit)
            opts="-h --json --helper --helper-socket --helper-ceiling --config --state-dir --model-script --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help)
            opts="list show audit undo help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help__subcmd__audit)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__help__subcmd__undo)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__list)
            opts="-h --helper --helper-socket --helper-ceiling --config --state-dir --model-script --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__show)
            opts="-h --helper --helper-socket --helper-ceiling --config --state-dir --model-script --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        agentd__subcmd__sessions__subcmd__undo)
            opts="-h --turn --dry-run --helper --helper-socket --helper-ceiling --config --state-dir --model-script --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helper-ceiling)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-script)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _agentd -o nosort -o bashdefault -o default agentd
else
    complete -F _agentd -o bashdefault -o default agentd
fi
