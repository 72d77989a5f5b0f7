// defines: the CPU reference ops — synchronous, fp32, written for clarity first and threaded
// where that is cheap (sf::parallel_for). Semantics are those documented on sf::Backend; the
// CpuBackend enqueues these on its stream threads. All float tensors are F32; ids/positions/
// cu_seqlens/targets are I32. Shapes are checked and a mismatch throws sf::Error naming the op.
#pragma once

#include "core/tensor.h"

namespace sf::cpu {

void fill_zero(Tensor x);
void convert(Tensor dst, Tensor src);  // F32 <-> BF16/F16 and F32 -> F32
void add(Tensor out, Tensor a, Tensor b);

void linear_forward(Tensor y, Tensor x, Tensor w, Tensor bias);
void linear_backward_input(Tensor dx, Tensor dy, Tensor w, bool accumulate);
void linear_backward_weight(Tensor dw, Tensor dbias, Tensor dy, Tensor x);

void embedding_forward(Tensor out, Tensor ids, Tensor table);
void embedding_backward(Tensor dtable, Tensor ids, Tensor dout);

void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor w, float eps);
void add_rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w,
                         float eps);
void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx);

void rope_forward(Tensor x, Tensor positions, Tensor inv_freq);
void rope_backward(Tensor dx, Tensor positions, Tensor inv_freq);

void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                       float scale);
void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                        Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens, float scale);

void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale);  // attention_decode.cpp

void swiglu_forward(Tensor out, Tensor gate, Tensor up);
void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up);

void linear_cross_entropy(Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w,
                          Tensor targets, float grad_scale);

}  // namespace sf::cpu
