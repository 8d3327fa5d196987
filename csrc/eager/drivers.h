// The drivers by name, and the switches Python sets on the fused driver.
// record/driver.h says what a driver is; these are the ones eager/ defines.
#pragma once
#include "record/driver.h"

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

Driver& strict_driver();
Driver& fused_driver();
// Python's optimizer hooks say when an optimizer.step() is being recorded by
// the fused driver: ops that read no storage (the optimizer's lazily created
// state) then run in strict eager, outside the step's graph.
void set_optimizer_step(bool on);
// While on, the fused driver records Python numbers (and wrapped-number CPU
// scalars) as constants of the program, their values in its key, instead
// of runtime parameters: for torch.compile graphs whose numbers are all
// constants of the graph (each parameter costs every execute). Fused eager
// keeps them as parameters, so that a learning-rate schedule reuses one
// program. Any flush turns it off (numbers recorded after a host read may
// be device values).
void set_bake_numbers(bool on);
// While on, the ops being recorded are a torch.compile graph's, run through
// the fused driver: their sizes are the graph's (bucketed or fixed by
// dynamo), so lengths stay in the program as in a capture instead of
// entering as runtime scalars (Driver::runtime_lengths). Returns the
// previous value, so that a graph run inside another restores it.
bool set_compiled_graph_run(bool on);

}  // namespace torch_tpu::eager
