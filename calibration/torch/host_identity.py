"""What host a measurement ran on, for the rows the host-time scripts write (imported by them)."""
import subprocess


def host_cpu_model():
    """lscpu's "Model name", or "" where lscpu is missing."""
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        return [l for l in lines if l.startswith("Model name")][0].split(":", 1)[1].strip()
    except Exception:
        return ""
