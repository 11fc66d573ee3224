//! Tests of the simulator through its request path.
