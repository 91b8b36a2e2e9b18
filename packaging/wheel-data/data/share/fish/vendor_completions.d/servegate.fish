# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_servegate_global_optspecs
    string join \n h/help V/version
end

function __fish_servegate_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_servegate_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_servegate_using_subcommand
    set -l cmd (__fish_servegate_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c servegate -n "__fish_servegate_needs_command" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_needs_command" -s V -l version -d 'Print version'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "run" -d 'Run suites: correctness probes first, then performance gates'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "review" -d 'Review pending snapshots: accept, reject or skip each new or changed answer (`<probe>.snap.new`), shown with its probe\'s suite line, prompt, model and a diff'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "baseline" -d 'Record baselines: the figures that `>= baseline * 0.95` thresholds compare with. Written only by this command, never by a run'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "list" -d 'List the trials of suites without running them'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "init" -d 'Write a first suite for a server: asks it what it serves, runs the starter probes and a short calibration (a single stream, then concurrent streams), and sets the gates\' thresholds from what it measured'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "import" -d 'Turn another tool\'s benchmark results into a run record that baselines (`baseline accept`), reports and comparisons read'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "schema" -d 'Print the JSON Schema of suite files (for editors: completion, hover docs, errors as you type; `schemas/suite.schema.json` is this)'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "completions" -d 'Print the completion script of a shell (e.g. `servegate completions bash > ~/.local/share/bash-completion/completions/servegate`)'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "man" -d 'Print the manual page (`servegate man | man -l -`), or write it and one page per command into a directory'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "sim" -d 'Serve the embedded simulator'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "report" -d 'Render a saved run record (`report.json`, or a run directory) as Markdown, JUnit XML, GitHub annotations, HTML or JSON; `report merge` joins the records of several nodes'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "history" -d 'The history of runs: list its series, show one with its runs and commits, import earlier records and other tools\' results'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "soak" -d 'Hold many streams against the simulator (in its own process) for a while, and check errors, memory, files and tasks stay flat'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "bench-client" -d 'Measure servegate\'s own client: CPU per token and timing accuracy, against the simulator in a separate process'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "__sandbox" -d 'The code-probe sandbox\'s helper: servegate re-executes itself with this to contain model-written code (never shown in `--help`)'
complete -c servegate -n "__fish_servegate_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand run" -l target -d '`sim` or a server URL; overrides every suite\'s `base_url`' -r
complete -c servegate -n "__fish_servegate_using_subcommand run" -l out-dir -d 'Where runs are written (`runs/<run>/`, `latest/`) [default: in the first suite\'s project, `target/servegate` in a Cargo project, else `.servegate`]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand run" -l keep -d 'Run directories kept under `runs/`, this one included; older ones are removed after the run (0: keep all)' -r
complete -c servegate -n "__fish_servegate_using_subcommand run" -l client-threads -d 'Client threads of every gate, whatever the suites say (each a runtime of its own owning a shard of the streams)' -r
complete -c servegate -n "__fish_servegate_using_subcommand run" -l client-limited -d 'What a gate whose client was the bottleneck does, whatever the suites say: `fail`, or `warn` (figures marked client-limited, judged as they are) [default: the suite\'s `client_limited`]' -r
complete -c servegate -n "__fish_servegate_using_subcommand run" -l history -d 'Where the run\'s figures are recorded: a SQLite file, or `off` [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand run" -s v -l verbose -d 'Say in full what a run says in short: the sandbox\'s layers part by part, with why one is missing'
complete -c servegate -n "__fish_servegate_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand review" -l from -d 'Pending answers downloaded from a CI run (its run directory or that directory\'s `snapshots/`), accepted into this project' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand review" -l accept-all -d 'Accept every pending answer without asking'
complete -c servegate -n "__fish_servegate_using_subcommand review" -l reject-all -d 'Reject every pending answer without asking'
complete -c servegate -n "__fish_servegate_using_subcommand review" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and not __fish_seen_subcommand_from save accept help" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and not __fish_seen_subcommand_from save accept help" -f -a "save" -d 'Run suites, then record the figures of every gate measured; a run that fails records nothing (exit codes as `run`\'s). Its `baseline` bounds are not applied: it replaces them'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and not __fish_seen_subcommand_from save accept help" -f -a "accept" -d 'Record the figures of the latest run (`<out>/latest/report.json`)'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and not __fish_seen_subcommand_from save accept help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l target -d '`sim` or a server URL; overrides every suite\'s `base_url`' -r
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l out-dir -d 'Where runs are written (`runs/<run>/`, `latest/`) [default: in the first suite\'s project, `target/servegate` in a Cargo project, else `.servegate`]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l keep -d 'Run directories kept under `runs/`, this one included; older ones are removed after the run (0: keep all)' -r
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l client-threads -d 'Client threads of every gate, whatever the suites say (each a runtime of its own owning a shard of the streams)' -r
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l client-limited -d 'What a gate whose client was the bottleneck does, whatever the suites say: `fail`, or `warn` (figures marked client-limited, judged as they are) [default: the suite\'s `client_limited`]' -r
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -l history -d 'Where the run\'s figures are recorded: a SQLite file, or `off` [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -s v -l verbose -d 'Say in full what a run says in short: the sandbox\'s layers part by part, with why one is missing'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from save" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from accept" -l out-dir -d 'servegate\'s output directory [default: `target/servegate` (or `.servegate` outside a Cargo project) in the working directory\'s project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from accept" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "save" -d 'Run suites, then record the figures of every gate measured; a run that fails records nothing (exit codes as `run`\'s). Its `baseline` bounds are not applied: it replaces them'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "accept" -d 'Record the figures of the latest run (`<out>/latest/report.json`)'
complete -c servegate -n "__fish_servegate_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand init" -l target -d '`sim` or the server\'s URL' -r
complete -c servegate -n "__fish_servegate_using_subcommand init" -l out -d 'The suite file to write' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand init" -l api -d 'The API the server speaks' -r
complete -c servegate -n "__fish_servegate_using_subcommand init" -l concurrency -d 'Streams of the concurrency gate' -r
complete -c servegate -n "__fish_servegate_using_subcommand init" -l client-limited -d 'What a calibration whose client was the bottleneck does: `fail` (the default against a server), or `warn`' -r
complete -c servegate -n "__fish_servegate_using_subcommand init" -l force -d 'Overwrite the suite file if it exists'
complete -c servegate -n "__fish_servegate_using_subcommand init" -s v -l verbose -d 'Say in full what it says in short: the sandbox its code probes run in, part by part, with why one is missing'
complete -c servegate -n "__fish_servegate_using_subcommand init" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand import; and not __fish_seen_subcommand_from bench-serving help" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand import; and not __fish_seen_subcommand_from bench-serving help" -f -a "bench-serving" -d 'The result file of `sglang.bench_serving --output-file` (JSON lines, one run each) or of `vllm bench serve --save-result` (one JSON object): each run a gate, its figures in servegate\'s names (its ITL is `itl_chunk`, the gap between chunks, or `itl` where SGLang\'s bench shares a chunk\'s gap among its tokens: its native backend, or beside a speculative accept length). Written as `<out>/runs/<run>/report.json` and `<out>/latest/report.json`'
complete -c servegate -n "__fish_servegate_using_subcommand import; and not __fish_seen_subcommand_from bench-serving help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -l suite -d 'The suite its figures belong to: a servegate suite\'s name, for `baseline accept` to give them to its gates [default: `bench_serving`]' -r
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -l gate -d 'The gate, for a file of one result [default: named by its load, `c8_rate_inf`]' -r
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -l fingerprint -d 'The configuration fingerprint, in place of the one made from the result (copy it from a servegate run\'s record to compare with that configuration)' -r
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -l hardware -d 'The hardware it ran on (`8 x NVIDIA H200`), which the result does not say: the history keys its series by it [default: `unknown`, never `no GPU`]' -r
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -l out-dir -d 'servegate\'s output directory [default: `target/servegate` (or `.servegate` outside a Cargo project) in the working directory\'s project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from bench-serving" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "bench-serving" -d 'The result file of `sglang.bench_serving --output-file` (JSON lines, one run each) or of `vllm bench serve --save-result` (one JSON object): each run a gate, its figures in servegate\'s names (its ITL is `itl_chunk`, the gap between chunks, or `itl` where SGLang\'s bench shares a chunk\'s gap among its tokens: its native backend, or beside a speculative accept length). Written as `<out>/runs/<run>/report.json` and `<out>/latest/report.json`'
complete -c servegate -n "__fish_servegate_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand schema" -l keys -d 'Print the key reference instead: every object of a suite file and its keys, as Markdown (`docs/src/suite-keys.md` is this)'
complete -c servegate -n "__fish_servegate_using_subcommand schema" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand completions" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand man" -l dir -d 'Write `servegate.1` and `servegate-<command>.1` pages here' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand man" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l port -d 'Port to listen on (0 picks a free one)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l host -d 'Address to bind; loopback unless you mean otherwise' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l profile -d 'A simulator profile (fixtures/sim/*.yaml)' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l ttft -d 'Time to first token, overriding the profile (e.g. `100ms`)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l itl -d 'Inter-token latency, overriding the profile (`0ms`: as fast as possible)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l capacity -d 'Streams decoded at full speed, overriding the profile' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l num-continuous-decode-steps -d 'SGLang\'s `--num-continuous-decode-steps`: tokens per streamed chunk, overriding the profile\'s `tokens_per_chunk` (and reported in `/server_info`)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l pack-tokens -d 'With `--stamp-tokens`: tokens after the first written N at a time, every N × ITL (a loaded server\'s events reaching its socket together)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l route -d 'Route every request round-robin to this worker (repeatable) instead of serving: a router in front of simulators, as SGLang\'s stands in front of its engines (`launch.workers`)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l loading -d 'Health checks answer 503 "Loading model" for this long after start' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speaks -d 'The server it speaks as, overriding the profile\'s `speaks`: its routes, answer shapes, errors and metric names (SGLang 0.5.23\'s, or vLLM 0.32\'s)' -r -f -a "sglang\t''
vllm\t''"
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l crash-after -d 'Abort (SIGABRT) when a generation request arrives after this many; speaking as vLLM, its engine dies instead (the request gets the error in its stream, `/health` 503, the process exits 3 s later)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l hang-after -d 'Stop answering anything (health included) when a generation request arrives after this many' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l scheduler-hang-after -d 'Stop generating when a generation request arrives after this many: a hung scheduler behind a live HTTP server. Generation requests hang; `/health_generate` (and `/health`, as in SGLang 0.5.23) answers 503 after `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s). At 0 the warmup never gets its token: 503 at once, and the process kills itself after `SGLANG_WARMUP_TIMEOUT` (600 s), unless `--skip-server-warmup`' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l api-key -d 'SGLang\'s `--api-key`: every route but health and metrics takes it' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l admin-api-key -d 'SGLang\'s `--admin-api-key`: `/flush_cache` takes it, and only it' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l server-info -d 'A `/get_server_info` field, as `KEY=VALUE` (VALUE read as JSON when it parses, else as a string); repeatable' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l say -d 'A line written to stderr at start (log-pattern tests); repeatable' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l fault -d 'A fault every generation request meets (`http_500`, `stall_mid_stream`, …)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l model-path -d 'SGLang\'s `--model-path`: the model served and reported' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l tp-size -d 'SGLang\'s `--tp-size` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l attention-backend -d 'SGLang\'s `--attention-backend` (reported; the profile\'s `sglang.hangs_with` backends hang the scheduler)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l quantization -d 'SGLang\'s `--quantization` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speculative-algorithm -d 'SGLang\'s `--speculative-algorithm` (reported; decodes speculatively, the profile\'s `sglang.speculative_step` tokens a verify step)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speculative-draft-model-path -d 'SGLang\'s `--speculative-draft-model-path` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speculative-num-steps -d 'SGLang\'s `--speculative-num-steps` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speculative-eagle-topk -d 'SGLang\'s `--speculative-eagle-topk` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l speculative-num-draft-tokens -d 'SGLang\'s `--speculative-num-draft-tokens` (reported; a verify step yields at most this many tokens)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l reasoning-parser -d 'SGLang\'s `--reasoning-parser` (reported)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l tool-call-parser -d 'SGLang\'s `--tool-call-parser` (reported; not the profile\'s `sglang.tool_call_parser`: tool calls stream as text)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l cuda-graph-max-bs-decode -d 'SGLang\'s `--cuda-graph-max-bs-decode` (reported; a decode pass with more requests running is counted without a CUDA graph)' -r
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l stamp-tokens -d 'Serve bench-client\'s truth instead of the simulator: a bare HTTP/1.1 streamer whose tokens are their own send times (µs since the epoch); any request but a POST gets an empty 404'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l never-ready -d 'Health checks never answer 200: a start-up that hangs'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l trust-remote-code -d 'SGLang\'s `--trust-remote-code` (taken, as a launch passes it)'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l enable-metrics -d 'SGLang\'s `--enable-metrics` (taken: the simulator always serves `/metrics`)'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l enable-cache-report -d 'SGLang\'s `--enable-cache-report` (reported; usage then says how many prompt tokens its prefix cache served, as the profile\'s `prefix_cache` does)'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l disable-cuda-graph -d 'SGLang\'s `--disable-cuda-graph` (deprecated in 0.5.23 for `--cuda-graph-backend-{decode,prefill}=disabled`, still taken; reported; every decode pass is counted without a CUDA graph, `decode_none`)'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -l skip-server-warmup -d 'SGLang\'s `--skip-server-warmup` (reported; up without the warmup request, so a scheduler hung from the start answers its health checks with 503 after their timeout instead of at once)'
complete -c servegate -n "__fish_servegate_using_subcommand sim" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand report; and not __fish_seen_subcommand_from merge help" -l format -d 'Output format' -r -f -a "md\t'Markdown summary'
junit\t'JUnit XML'
annotations\t'GitHub Actions annotations'
html\t'The self-contained HTML report'
json\t'The record itself'
csv\t'Every gate\'s figures as CSV, a row each (for a spreadsheet)'"
complete -c servegate -n "__fish_servegate_using_subcommand report; and not __fish_seen_subcommand_from merge help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand report; and not __fish_seen_subcommand_from merge help" -a "merge" -d 'Merge the run records of several nodes (one CI job each) into one report: `summary.md` (also printed), `junit.xml` and `report.html`, a row per node and suite, the same gate across nodes side by side'
complete -c servegate -n "__fish_servegate_using_subcommand report; and not __fish_seen_subcommand_from merge help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand report; and __fish_seen_subcommand_from merge" -l out-dir -d 'Where the three files are written' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand report; and __fish_seen_subcommand_from merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand report; and __fish_seen_subcommand_from help" -f -a "merge" -d 'Merge the run records of several nodes (one CI job each) into one report: `summary.md` (also printed), `junit.xml` and `report.html`, a row per node and suite, the same gate across nodes side by side'
complete -c servegate -n "__fish_servegate_using_subcommand report; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -l history -d 'The history: a SQLite file [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -l out-dir -d 'servegate\'s output directory, where the default history is [default: `target/servegate` in the working directory\'s project, or `.servegate` outside a Cargo project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -f -a "list" -d 'List the series: each suite\'s gate\'s figure, per model and hardware, with its points and newest value'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -f -a "show" -d 'Show one series\' newest points, oldest first, with their runs, machines and commits'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -f -a "report" -d 'Write the history as an HTML page: the changes of level found, and one plot per series with its runs (hover a dot: run, time, value, commit, configuration) and its changes marked'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -f -a "import" -d 'Add earlier runs to the history: their `report.json`, run directories, output directories (every run under `runs/`), or the result files of `sglang.bench_serving` and `vllm bench serve`. A run already in it is left as it is'
complete -c servegate -n "__fish_servegate_using_subcommand history; and not __fish_seen_subcommand_from list show report import help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l suite -d 'Only series whose suite\'s label holds this' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l gate -d 'Only series whose gate\'s name holds this' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l figure -d 'Only series whose figure\'s name holds this (`decode_tok_s`) [default: the key figures, as the reports show them]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l format -d '`table` for people, `json` for scripts' -r -f -a "table\t'Aligned columns'
json\t'One JSON document'"
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l history -d 'The history: a SQLite file [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l out-dir -d 'servegate\'s output directory, where the default history is [default: `target/servegate` in the working directory\'s project, or `.servegate` outside a Cargo project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -l all -d 'Every figure\'s series, not only the key figures\''
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l model -d 'The served model, where the series has several' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l hardware -d 'The hardware (`8 x NVIDIA H200`, `no GPU`), where it has several' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l last -d 'How many of the newest points to show (the changes of level are found in the whole series)' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l format -d '`table` for people, `json` for scripts' -r -f -a "table\t'Aligned columns'
json\t'One JSON document'"
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l history -d 'The history: a SQLite file [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -l out-dir -d 'servegate\'s output directory, where the default history is [default: `target/servegate` in the working directory\'s project, or `.servegate` outside a Cargo project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l suite -d 'Only series whose suite\'s label holds this' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l gate -d 'Only series whose gate\'s name holds this' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l figure -d 'Only series whose figure\'s name holds this (`decode_tok_s`) [default: the key figures, as the reports show them]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l last -d 'How many of each series\' newest points to plot (the changes of level are found in the whole series)' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -s o -l output -d 'The page [default: `history.html` in the output directory]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l history -d 'The history: a SQLite file [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l out-dir -d 'servegate\'s output directory, where the default history is [default: `target/servegate` in the working directory\'s project, or `.servegate` outside a Cargo project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -l all -d 'Every figure\'s series, not only the key figures\''
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from import" -l history -d 'The history: a SQLite file [default: `history.sqlite` in the output directory]' -r
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from import" -l out-dir -d 'servegate\'s output directory, where the default history is [default: `target/servegate` in the working directory\'s project, or `.servegate` outside a Cargo project]' -r -F
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the series: each suite\'s gate\'s figure, per model and hardware, with its points and newest value'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one series\' newest points, oldest first, with their runs, machines and commits'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "report" -d 'Write the history as an HTML page: the changes of level found, and one plot per series with its runs (hover a dot: run, time, value, commit, configuration) and its changes marked'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "import" -d 'Add earlier runs to the history: their `report.json`, run directories, output directories (every run under `runs/`), or the result files of `sglang.bench_serving` and `vllm bench serve`. A run already in it is left as it is'
complete -c servegate -n "__fish_servegate_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand soak" -l streams -d 'Concurrent streams' -r
complete -c servegate -n "__fish_servegate_using_subcommand soak" -l windows -d 'Windows run back to back, the client sampled after each' -r
complete -c servegate -n "__fish_servegate_using_subcommand soak" -l window -d 'Length of each window' -r
complete -c servegate -n "__fish_servegate_using_subcommand soak" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l streams -d 'Streams (closed-loop concurrency) of the rows' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l threads -d 'Client threads of the rows' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l itl -d 'The simulator\'s gap between tokens of the rows (`0`: unpaced, every token as fast as it can send)' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l tokens -d 'Tokens per stream' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l duration -d 'Measured window per row' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l contention -d 'Other work beside the client during every row: `host` (a worker at normal priority on every core), `starved` (a real-time thread on the client\'s core, 20 ms on, 5 ms off)' -r -f -a "none\t'Nothing else'
host\t'A busy host: a worker at normal priority on every core, spinning and sweeping 32 MiB (the CPU, its caches and memory bandwidth shared, as a GPU host\'s own processes share them). The client keeps its share and its stamps keep the figures true'
starved\t'A starved client: a real-time (`SCHED_FIFO`) thread on the client\'s core, 20 ms on and 5 ms off, as a busy-polling scheduler thread takes it. The client\'s figures move; the self-check must say so'"
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l ttft -d 'The simulator\'s time to first token (default: 10ms for paced rows, 0 unpaced)' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l pack -d 'Tokens after the first the simulator writes at once, every N × ITL (a loaded server\'s events reaching its socket together)' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l format -d '`table` for people, `json` for scripts' -r -f -a "table\t'Aligned tables for people'
json\t'One JSON document (`servegate_version`, the options, `rows`): for scripts that compare runs (`scripts/bench-client-ab.sh`)'"
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l history -d 'Keep every row\'s figures in this run history (a SQLite file, or a `postgres://` URL), under the commit measured, and compare them with the newest run of another commit on this machine' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l commit -d 'The commit of the servegate measured, as the history keeps it [default: the working directory\'s checkout, `+dirty` with changes]' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -l warmup -d 'Warm-up requests of each row [default: one per stream, which opens every stream\'s connection in the warm-up; fewer leave the rest to be opened before the window]' -r
complete -c servegate -n "__fish_servegate_using_subcommand bench-client" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c servegate -n "__fish_servegate_using_subcommand __sandbox" -s h -l help -d 'Print help'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "run" -d 'Run suites: correctness probes first, then performance gates'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "review" -d 'Review pending snapshots: accept, reject or skip each new or changed answer (`<probe>.snap.new`), shown with its probe\'s suite line, prompt, model and a diff'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "baseline" -d 'Record baselines: the figures that `>= baseline * 0.95` thresholds compare with. Written only by this command, never by a run'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "list" -d 'List the trials of suites without running them'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "init" -d 'Write a first suite for a server: asks it what it serves, runs the starter probes and a short calibration (a single stream, then concurrent streams), and sets the gates\' thresholds from what it measured'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "import" -d 'Turn another tool\'s benchmark results into a run record that baselines (`baseline accept`), reports and comparisons read'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "schema" -d 'Print the JSON Schema of suite files (for editors: completion, hover docs, errors as you type; `schemas/suite.schema.json` is this)'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "completions" -d 'Print the completion script of a shell (e.g. `servegate completions bash > ~/.local/share/bash-completion/completions/servegate`)'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "man" -d 'Print the manual page (`servegate man | man -l -`), or write it and one page per command into a directory'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "sim" -d 'Serve the embedded simulator'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "report" -d 'Render a saved run record (`report.json`, or a run directory) as Markdown, JUnit XML, GitHub annotations, HTML or JSON; `report merge` joins the records of several nodes'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "history" -d 'The history of runs: list its series, show one with its runs and commits, import earlier records and other tools\' results'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "soak" -d 'Hold many streams against the simulator (in its own process) for a while, and check errors, memory, files and tasks stay flat'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "bench-client" -d 'Measure servegate\'s own client: CPU per token and timing accuracy, against the simulator in a separate process'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "__sandbox" -d 'The code-probe sandbox\'s helper: servegate re-executes itself with this to contain model-written code (never shown in `--help`)'
complete -c servegate -n "__fish_servegate_using_subcommand help; and not __fish_seen_subcommand_from run review baseline list init import schema completions man sim report history soak bench-client __sandbox help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "save" -d 'Run suites, then record the figures of every gate measured; a run that fails records nothing (exit codes as `run`\'s). Its `baseline` bounds are not applied: it replaces them'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "accept" -d 'Record the figures of the latest run (`<out>/latest/report.json`)'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from import" -f -a "bench-serving" -d 'The result file of `sglang.bench_serving --output-file` (JSON lines, one run each) or of `vllm bench serve --save-result` (one JSON object): each run a gate, its figures in servegate\'s names (its ITL is `itl_chunk`, the gap between chunks, or `itl` where SGLang\'s bench shares a chunk\'s gap among its tokens: its native backend, or beside a speculative accept length). Written as `<out>/runs/<run>/report.json` and `<out>/latest/report.json`'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from report" -f -a "merge" -d 'Merge the run records of several nodes (one CI job each) into one report: `summary.md` (also printed), `junit.xml` and `report.html`, a row per node and suite, the same gate across nodes side by side'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "list" -d 'List the series: each suite\'s gate\'s figure, per model and hardware, with its points and newest value'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "show" -d 'Show one series\' newest points, oldest first, with their runs, machines and commits'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "report" -d 'Write the history as an HTML page: the changes of level found, and one plot per series with its runs (hover a dot: run, time, value, commit, configuration) and its changes marked'
complete -c servegate -n "__fish_servegate_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "import" -d 'Add earlier runs to the history: their `report.json`, run directories, output directories (every run under `runs/`), or the result files of `sglang.bench_serving` and `vllm bench serve`. A run already in it is left as it is'
