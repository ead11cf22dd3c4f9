_kvaudit() {
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
                cmd="kvaudit"
                ;;
            kvaudit,capture)
                cmd="kvaudit__subcmd__capture"
                ;;
            kvaudit,check)
                cmd="kvaudit__subcmd__check"
                ;;
            kvaudit,completions)
                cmd="kvaudit__subcmd__completions"
                ;;
            kvaudit,corpus)
                cmd="kvaudit__subcmd__corpus"
                ;;
            kvaudit,diff-turns)
                cmd="kvaudit__subcmd__diff__subcmd__turns"
                ;;
            kvaudit,fetch)
                cmd="kvaudit__subcmd__fetch"
                ;;
            kvaudit,help)
                cmd="kvaudit__subcmd__help"
                ;;
            kvaudit,init)
                cmd="kvaudit__subcmd__init"
                ;;
            kvaudit,keys)
                cmd="kvaudit__subcmd__keys"
                ;;
            kvaudit,merge)
                cmd="kvaudit__subcmd__merge"
                ;;
            kvaudit,probe)
                cmd="kvaudit__subcmd__probe"
                ;;
            kvaudit,render)
                cmd="kvaudit__subcmd__render"
                ;;
            kvaudit,replay)
                cmd="kvaudit__subcmd__replay"
                ;;
            kvaudit,watch)
                cmd="kvaudit__subcmd__watch"
                ;;
            kvaudit__subcmd__help,capture)
                cmd="kvaudit__subcmd__help__subcmd__capture"
                ;;
            kvaudit__subcmd__help,check)
                cmd="kvaudit__subcmd__help__subcmd__check"
                ;;
            kvaudit__subcmd__help,completions)
                cmd="kvaudit__subcmd__help__subcmd__completions"
                ;;
            kvaudit__subcmd__help,corpus)
                cmd="kvaudit__subcmd__help__subcmd__corpus"
                ;;
            kvaudit__subcmd__help,diff-turns)
                cmd="kvaudit__subcmd__help__subcmd__diff__subcmd__turns"
                ;;
            kvaudit__subcmd__help,fetch)
                cmd="kvaudit__subcmd__help__subcmd__fetch"
                ;;
            kvaudit__subcmd__help,help)
                cmd="kvaudit__subcmd__help__subcmd__help"
                ;;
            kvaudit__subcmd__help,init)
                cmd="kvaudit__subcmd__help__subcmd__init"
                ;;
            kvaudit__subcmd__help,keys)
                cmd="kvaudit__subcmd__help__subcmd__keys"
                ;;
            kvaudit__subcmd__help,merge)
                cmd="kvaudit__subcmd__help__subcmd__merge"
                ;;
            kvaudit__subcmd__help,probe)
                cmd="kvaudit__subcmd__help__subcmd__probe"
                ;;
            kvaudit__subcmd__help,render)
                cmd="kvaudit__subcmd__help__subcmd__render"
                ;;
            kvaudit__subcmd__help,replay)
                cmd="kvaudit__subcmd__help__subcmd__replay"
                ;;
            kvaudit__subcmd__help,watch)
                cmd="kvaudit__subcmd__help__subcmd__watch"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        kvaudit)
            opts="-q -h -V --color --quiet --help --version diff-turns fetch replay keys render capture watch check corpus merge probe init completions help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__capture)
            opts="-q -h -V --endpoint --bind --topic --out --max-messages --duration --replay-endpoint --live-replay --index-block-size --block-sizes --router --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --engine --connect-timeout --max-message-size --replay-timeout --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --topic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-messages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replay-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine)
                    COMPREPLY=($(compgen -W "vllm sglang" -- "${cur}"))
                    return 0
                    ;;
                --connect-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-message-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replay-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__check)
            opts="-m -c -o -j -q -h -V --router-config --router --engine-block-size --engine-args --config --model --scenario --template --baseline-template --baseline --update-baseline --format --output --explain --list-codes --offline --jobs --no-remedies --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --router-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scenario)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --baseline-template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --baseline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json sarif junit markdown" -- "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --explain)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__completions)
            opts="-q -h -V --color --quiet --help --version bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__corpus)
            opts="-m -j -q -h -V --model --revision --offline --template --template-name --tokenizer --format-in --limit --sample --seed --parquet-limit --jobs --reply-format --template-kwarg --kwargs-turn --server --server-template-kwarg --now --fuel --block-sizes --router-config --router --index-block-size --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --decider --engine-block-size --no-router --remedies --prefill-affinity --kv-recompute-threshold --kv-bytes-per-token --per-transition --html --worst --partial --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokenizer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format-in)
                    COMPREPLY=($(compgen -W "auto openai sharegpt wildchat" -- "${cur}"))
                    return 0
                    ;;
                --limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sample)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --parquet-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kwargs-turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "transformers vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --decider)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefill-affinity)
                    COMPREPLY=($(compgen -W "same none" -- "${cur}"))
                    return 0
                    ;;
                --kv-recompute-threshold)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bytes-per-token)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --per-transition)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --html)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --worst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --partial)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json markdown html" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__diff__subcmd__turns)
            opts="-m -c -q -h -V --model --revision --offline --template --template-name --tokenizer --conversation --system --user --reply --reasoning --follow-up --resend --reply-format --template-kwarg --kwargs-turn --server --server-template-kwarg --now --fuel --date-rollover --remedies --block-sizes --router-config --router --index-block-size --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --decider --engine-block-size --format --only-rewrites --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokenizer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reasoning)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --follow-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resend)
                    COMPREPLY=($(compgen -W "content raw reasoning-field" -- "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kwargs-turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "transformers vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --decider)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json markdown" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__fetch)
            opts="-q -h -V --revision --offline --force --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__help)
            opts="diff-turns fetch replay keys render capture watch check corpus merge probe init completions help"
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
        kvaudit__subcmd__help__subcmd__capture)
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
        kvaudit__subcmd__help__subcmd__check)
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
        kvaudit__subcmd__help__subcmd__completions)
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
        kvaudit__subcmd__help__subcmd__corpus)
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
        kvaudit__subcmd__help__subcmd__diff__subcmd__turns)
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
        kvaudit__subcmd__help__subcmd__fetch)
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
        kvaudit__subcmd__help__subcmd__help)
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
        kvaudit__subcmd__help__subcmd__init)
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
        kvaudit__subcmd__help__subcmd__keys)
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
        kvaudit__subcmd__help__subcmd__merge)
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
        kvaudit__subcmd__help__subcmd__probe)
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
        kvaudit__subcmd__help__subcmd__render)
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
        kvaudit__subcmd__help__subcmd__replay)
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
        kvaudit__subcmd__help__subcmd__watch)
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
        kvaudit__subcmd__init)
            opts="-m -q -h -V --model --output --force --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__keys)
            opts="-m -c -q -h -V --tokens --tokens-file --model --offline --template --conversation --system --user --reply --reasoning --follow-up --resend --reply-format --template-kwarg --kwargs-turn --server --server-template-kwarg --now --fuel --index-block-size --block-sizes --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reasoning)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --follow-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resend)
                    COMPREPLY=($(compgen -W "content raw reasoning-field" -- "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kwargs-turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "transformers vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__merge)
            opts="-q -h -V --html --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --html)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json markdown html" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__probe)
            opts="-m -c -q -h -V --url --model --revision --offline --template --template-name --tokenizer --served-model --server --conversation --system --user --follow-up --resend --turns --max-tokens --seed --block-size --block-sizes --api-key --header --pod-header --timeout --connect-timeout --save-conversation --reply-format --template-kwarg --server-template-kwarg --now --fuel --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokenizer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --served-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --follow-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resend)
                    COMPREPLY=($(compgen -W "content raw reasoning-field" -- "${cur}"))
                    return 0
                    ;;
                --turns)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --header)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-header)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --save-conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__render)
            opts="-m -c -q -h -V --model --revision --offline --template --template-name --tokenizer --conversation --system --user --reply --reasoning --follow-up --resend --reply-format --template-kwarg --kwargs-turn --server --server-template-kwarg --now --fuel --tokens --prompt --held --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokenizer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reasoning)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --follow-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resend)
                    COMPREPLY=($(compgen -W "content raw reasoning-field" -- "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kwargs-turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "transformers vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --held)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__replay)
            opts="-q -h -V --index-block-size --block-sizes --router --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --engine --lookup --keep-going --pod --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --block-sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine)
                    COMPREPLY=($(compgen -W "vllm sglang" -- "${cur}"))
                    return 0
                    ;;
                --lookup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json prometheus" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        kvaudit__subcmd__watch)
            opts="-m -q -h -V --model --revision --offline --template --template-name --tokenizer --pod --bind --upstream --mirror --listen --pod-header --metrics --interval --duration --drain --topic --max-body --connect-timeout --requests --block-size --pod-api --pod-replay --replay-timeout --capacity --conversations --record --partial --per-request --router-config --router --index-block-size --hash --hash-seed --model-name --llmd-profile --topic-filter --global-socket --decider --reply-format --template-kwarg --kwargs-turn --server --server-template-kwarg --now --fuel --format --color --quiet --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --template-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokenizer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --upstream)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mirror)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-header)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drain)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --topic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-body)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-api)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-replay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replay-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --capacity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversations)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --record)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --partial)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --per-request)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --router)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -W "cbor-fnv xxh64" -- "${cur}"))
                    return 0
                    ;;
                --hash-seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llmd-profile)
                    COMPREPLY=($(compgen -W "digest-first router-2026-08" -- "${cur}"))
                    return 0
                    ;;
                --topic-filter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --decider)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply-format)
                    COMPREPLY=($(compgen -W "plain think_nl think_tight harmony" -- "${cur}"))
                    return 0
                    ;;
                --template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kwargs-turn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -W "transformers vllm vllm@0.32 sglang sglang@0.5.23 sglang@main llamacpp" -- "${cur}"))
                    return 0
                    ;;
                --server-template-kwarg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --now)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fuel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "human json prometheus" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
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
    complete -F _kvaudit -o nosort -o bashdefault -o default kvaudit
else
    complete -F _kvaudit -o bashdefault -o default kvaudit
fi
