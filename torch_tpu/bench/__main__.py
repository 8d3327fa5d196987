"""python -m torch_tpu.bench [train|ops] [options]; see --help of each."""
import sys


def main():
    args = sys.argv[1:]
    cmd = args.pop(0) if args and args[0] in ("train", "ops") else "train"
    if cmd == "ops":
        from torch_tpu.bench import ops
        ops.main(args)
    else:
        from torch_tpu.bench import train
        train.main(args)


if __name__ == "__main__":
    main()
