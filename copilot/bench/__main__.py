from copilot.bench.cli import bench

if __name__ == "__main__":
    bench(prog_name="python -m copilot.bench")
