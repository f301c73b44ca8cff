# gv_pingpong's command line: every number parsed whole and range-checked, help exits 0.
#   bash cli_gv_pingpong.sh <path to gv_pingpong>
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
bin=$1
usage='usage: .*gv_pingpong'
expect 0 "$usage" "$bin" -h
expect 0 "$usage" "$bin" --help
expect 0 "$usage" "$bin" -s 8 --help
expect 2 "-s 'abc' is not a whole number.*1 \.\. 1073741824" "$bin" -s abc
expect 2 "-n 'abc' is not a whole number" "$bin" -n abc
expect 2 "-s '1e3' is not a whole number" "$bin" -s 1e3
expect 2 "-n '-1' is not a whole number" "$bin" -n -1
expect 2 "-s '0' is out of range" "$bin" -s 0
expect 2 "-s '1073741825' is out of range" "$bin" -s 1073741825
expect 2 "-s '99999999999999999999999' is out of range" "$bin" -s 99999999999999999999999
expect 2 "-n '0' is out of range" "$bin" -n 0
expect 2 "-s '' is empty" "$bin" -s ''
expect 2 "-s needs a value" "$bin" -s
expect 2 "--poll takes last-byte or completion" "$bin" --poll sometimes
expect 2 "unknown argument --bogus.*$usage" "$bin" --bogus
# The provider, with perftest's letters for the NIC (which need --provider mlx5).
expect 2 "--provider takes soft or mlx5, not 'rxe'" "$bin" --provider rxe
expect 2 "-d, -i and -x choose a NIC: add --provider mlx5" "$bin" -d mlx5_0
expect 2 "-i '0' is out of range" "$bin" --provider mlx5 -i 0
expect 2 "-x 'x' is not a whole number" "$bin" --provider mlx5 -x x
expect 0 "t_typical" "$bin" -s 64 -n 20
# Latency, bandwidth and message-rate rows by default; --run picks.
expect 0 "t_typical.*BW average\[GB/s\].*MsgRate\[Mmsg/s\]" "$bin" -n 200
expect 0 "^# bw.*BW average" "$bin" --run bw -n 200
expect 2 "--run takes a comma list of latency, bw, msgrate; not 'lat'" "$bin" --run lat
# Three spinning threads (two ping-pong sides and the engine): flagged on fewer cores.
if (($(nproc) < 3)); then
  expect 0 "warning: 3 spinning threads .* on $(nproc) cores" "$bin" --run latency -n 20
fi
# Beyond the default arena (64 MiB): the device is opened large enough for the sizes asked for.
expect 0 "33554432 " "$bin" -s 33554432 -n 2
# --json FILE adds rows to FILE (appended, after an object naming the run) and keeps the table.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect 0 "t_typical.*BW average" "$bin" -s 8 -n 20 --run latency,bw --json "$tmp/rows.json"
expect 0 "t_typical" "$bin" -s 16 -n 20 --run latency --json "$tmp/rows.json"
meta='^\{"bench":"metadata","host":"[^"]*","commit":"[^"]+","device":"soft provider, CPU engine, on [^"]+","date":"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z","command":"[^"]*gv_pingpong -s 8 -n 20 --run latency,bw --json [^"]*rows\.json"\}$'
expect 0 "$meta" sed -n 1p "$tmp/rows.json"
expect 0 '^\{"bench":"pingpong","provider":"soft","mode":"cpu-threads","variant":"last_byte","bytes":8,.*\}$' sed -n 2p "$tmp/rows.json"
expect 0 '^\{"bench":"bw",.*"bytes":8,.*\}$' sed -n 3p "$tmp/rows.json"
expect 0 '^\{"bench":"metadata",.*gv_pingpong -s 16 .*\}$' sed -n 4p "$tmp/rows.json"
expect 0 '^\{"bench":"pingpong",.*"bytes":16,.*\}$' sed -n 5p "$tmp/rows.json"
expect 0 '^5 ' wc -l "$tmp/rows.json"
expect 2 "--json needs a value" "$bin" --json
finish
