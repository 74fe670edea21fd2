// Internal: the bf16 tensor-core (mma.sync, sm_80+) path of fused_attention_forward/backward
// (fused_attention_tc.cu). fused_attention.cu validates the arguments and dispatches here.
#pragma once

#include <cuda_runtime.h>

#include "attention/cuda/fused_attention.cuh"

namespace attention::cuda::tc {

// Whether this call can take the tensor-core path on the current device: bf16, compute capability
// 8.0 or newer, a kernel image built for sm_80+, and enough opt-in shared memory per block. The
// device properties are queried once per device and cached.
bool usable(const FusedArgs& args, bool backward);

// Same contract as fused_attention_forward/backward, for arguments the caller has validated
// (bf16, D ∈ {64, 128}, non-empty, aligned) and for which usable() holds. The backward pass uses
// the workspace layout of fused_attention_backward_workspace_bytes.
cudaError_t forward(const FusedArgs& args, cudaStream_t stream);
cudaError_t backward(const FusedArgs& args, cudaStream_t stream);

}  // namespace attention::cuda::tc
