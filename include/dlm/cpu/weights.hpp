// dlm/cpu/weights.hpp — the transformer's weights under the CPU backend's names (dlm::cpu::matrix,
// cpu::transformer_weights, cpu::tensor_role, ...). They are backend-neutral and live in
// model/transformer_weights.hpp, which the CUDA backend includes instead of this header.
#pragma once

#include "../model/transformer_weights.hpp"

namespace dlm::cpu {

using matrix = f32_matrix;
using vector = f32_vector;
using dlm::layer_weights;
using dlm::random_spread;
using dlm::random_spread_of;
using dlm::random_weights;
using dlm::stored_slice;
using dlm::stored_slice_of;
using dlm::tensor_name;
using dlm::tensor_role;
using dlm::tensor_shape;
using dlm::transformer_weights;
using dlm::weight_order;

namespace detail {
using dlm::detail::splitmix;
}  // namespace detail

}  // namespace dlm::cpu
