"""python -m torch_tpu.bench [train|ops|spmd|depth] [options], --loop real for the
real-loop bench (torch_tpu.bench.real_loop), or --generate for Hugging Face
generate() (torch_tpu.bench.generate); see --help of each."""
import sys


def main():
    args = sys.argv[1:]
    if "--generate" in args:
        from torch_tpu.bench import generate
        args.remove("--generate")
        generate.main(args)
        return
    if "--loop" in args:
        i = args.index("--loop")
        loop = args[i + 1] if i + 1 < len(args) else ""
        if loop != "real":
            raise SystemExit(f"python -m torch_tpu.bench: --loop takes 'real', got {loop!r}")
        from torch_tpu.bench import real_loop
        real_loop.main(args[:i] + args[i + 2:])
        return
    cmd = args.pop(0) if args and args[0] in ("train", "ops", "spmd", "depth") else "train"
    if cmd == "depth":
        from torch_tpu.bench import depth
        depth.main(args)
    elif cmd == "spmd":
        from torch_tpu.bench import spmd
        spmd.main(args)
    elif cmd == "ops":
        from torch_tpu.bench import ops
        ops.main(args)
    else:
        from torch_tpu.bench import train
        train.main(args)


if __name__ == "__main__":
    main()
