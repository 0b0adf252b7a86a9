"""What the ranks run: the workloads (workloads), how the launchers wrap them (launch), the wrapper's nsys settings (nsysargs)."""
