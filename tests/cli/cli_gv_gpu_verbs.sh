# gv_gpu_verbs's command line: parsed (and refused) before any GPU is looked for, so it is
# tested on machines without one; on those a valid command line ends with what is missing.
#   bash cli_gv_gpu_verbs.sh <path to gv_gpu_verbs>
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
bin=$1
usage='usage: gv_gpu_verbs pingpong\|bw'
expect 0 "$usage" "$bin" -h
expect 0 "$usage" "$bin" --help
expect 0 "$usage" "$bin" pingpong -s 8 -h
expect 2 "no subcommand.*$usage" "$bin"
expect 2 "unknown subcommand ping" "$bin" ping
expect 2 "-s 'abc' is not a whole number" "$bin" pingpong -s abc
expect 2 "-s '1e3' is not a whole number" "$bin" pingpong -s 1e3
expect 2 "-s '67108865' is out of range" "$bin" bw -s 67108865
expect 2 "-n '-1' is not a whole number" "$bin" msgrate -n -1
expect 2 "-n '1000001' is out of range" "$bin" msgrate -n 1000001
expect 2 "--gpus '3' is out of range" "$bin" pingpong --gpus 3
expect 2 "--engine-warps '1e1' is not a whole number" "$bin" pingpong --engine-warps 1e1
expect 2 "--poster takes exclusive or owner, not 'shared'" "$bin" pingpong --poster shared
expect 2 "--poster needs a value" "$bin" pingpong --poster
expect 2 "--hold-ms '0' is out of range" "$bin" drain --hold-ms 0
expect 2 "unknown argument --hold-ms" "$bin" pingpong --hold-ms 5
expect 2 "unknown mode 'gpu'" "$bin" pingpong --mode gpu
expect 2 "unknown mode 'host'" "$bin" pingpong --mode host  # renamed: host-controlled or cpu-threads
expect 0 "host-controlled, host-assisted, cpu-threads" "$bin" --help
expect 2 "--json needs a value" "$bin" pingpong --json
# A NIC: --provider mlx5 with perftest's letters; the two-host ping-pong needs it.
expect 2 "--provider takes soft or mlx5, not 'rxe'" "$bin" pingpong --provider rxe
expect 2 "-d, -i and -x choose a NIC: add --provider mlx5" "$bin" bw -x 3
expect 2 "pingpong SERVER runs between two hosts: add --provider mlx5" "$bin" pingpong node7
expect 2 "-p '80' is out of range" "$bin" pingpong --provider mlx5 -p 80
expect 2 "unknown argument node7" "$bin" bw node7 --provider mlx5
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  expect 1 "no NVIDIA GPU or driver found" "$bin" anchors -n 10
  expect 1 "no NVIDIA GPU or driver found" "$bin" devices
fi
finish
