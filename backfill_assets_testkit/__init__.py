"""What the tests and the benchmarks share, below both: the reference implementation of the
contract, the feeds (generated, adversarial, fuzzed) and the contract's independent jobs, the
servers and processes they start, and the fault and concurrency harnesses. Neither the package
nor this kit imports a test or a benchmark."""
