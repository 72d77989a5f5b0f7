#include "engine/predict.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/host_memory.h"
#include "engine/unit_state.h"
#include "io/nvme_probe.h"
#include "model/layout.h"

namespace sf {
namespace {

// Bytes a second the host's memory carries at most: the most the probe saw a pass alone carry
// (the whole update, the master alone, m and v alone). The AdamW beside the probe's copies carried
// more, both counted (161 against 141 GB/s on an H100 host), but no step reached that: the traced
// clipped steps carried 129-136 GB/s in both phases (docs/decisions.md, "The host's ceiling is a
// pass's"). 0 where the probe did not measure the copies beside the AdamW (an older cache, a
// replay without it): no floor.
double host_ceiling(const MachineConstants& m, double grad_bytes) {
  if (m.copy_beside_adam_gbps <= 0) return 0;
  const double all = adamw_bytes_per_param(AdamWWrite::kAll, grad_bytes);
  return std::max(
      {m.adam_params_per_s * all,
       m.adam_master_params_per_s * adamw_bytes_per_param(AdamWWrite::kWeights, grad_bytes),
       m.adam_moments_params_per_s * adamw_bytes_per_param(AdamWWrite::kMoments, grad_bytes)});
}

// One step of the schedule on absolute time; `ready[u]` is when unit u's update of the previous
// step is done (its upload waits for it), and is overwritten with this step's.
struct Sim {
  const EnginePlan& plan;
  const ModelSpec& spec;
  const MachineConstants& m;
  int64_t T;
  bool clipping;
  std::vector<int64_t> numel;  // per unit
  double h2d_rate, d2h_rate, head_flops;
  double cost;  // micro_batch_cost at the plan's M

  double up(size_t u) const {  // fp32 master H2D (a GPU-resident unit is only cast)
    return plan.on_device[u] ? 0 : 4.0 * double(numel[u]) / h2d_rate;
  }

  struct Out {
    double end, forward_end, head_end, gpu_end;
  };

  // `cpu` is when the CPU AdamW is next free: held updates run on into the next step.
  // `moments[u]`: when a moments_later unit's m and v of the previous step are written (its next
  // gradient's D2H waits for them); overwritten with this step's.
  Out step(double t0, std::vector<double>& ready, double& cpu, std::vector<double>& moments,
           StepPrediction* totals) const {
    const int L = int(spec.layers), W = plan.window;
    const size_t head_unit = size_t(L) + 1;
    const double act = double(T * spec.hidden) * double(plan.dtype_bytes);
    const double cf = double(T) * m.layer_forward_s * cost,
                 cb = double(T) * m.layer_backward_s * cost;
    double h2d = t0, d2h = t0;
    // forward
    h2d = std::max(h2d, ready[0]) + up(0);  // the embedding
    double comp = h2d;
    std::vector<double> fwd_end(size_t(L), t0), offload_end(size_t(L), t0);
    std::vector<double> up_end(size_t(L), t0);
    auto upload = [&](int i, double slot_free) {
      const double start = std::max({h2d, slot_free, ready[size_t(1 + i)]});
      h2d = start + up(size_t(1 + i));
      up_end[size_t(i)] = h2d;
    };
    int issued = 0;
    for (int i = 0; i < L; ++i) {
      // The host issues the loads of layers i .. i+W-1 before layer i's compute; it blocks on
      // each load's update (wait_updated), so the compute cannot be issued before them either.
      double host_gate = t0;
      for (; issued < std::min(L, i + W); ++issued) {
        upload(issued, issued >= W ? fwd_end[size_t(issued - W)] : t0);
        host_gate = std::max(host_gate, ready[size_t(1 + issued)]);
      }
      double start = std::max({comp, up_end[size_t(i)], host_gate});
      if (i >= 1) start = std::max(start, offload_end[size_t(i - 1)]);  // y overwrites x_{i-1}
      comp = start + cf;
      fwd_end[size_t(i)] = comp;
      // the checkpoint of x_i goes D2H while layer i computes
      d2h = std::max(d2h, start) + act / d2h_rate;
      offload_end[size_t(i)] = d2h;
    }
    const double forward_end = comp;
    // head: its upload, then the fused head over the step's tokens; its gradient goes D2H
    h2d = std::max(h2d, ready[head_unit]) + up(head_unit);
    comp = std::max(comp, h2d) + head_flops / (m.layer_tflops * 1e12);
    const double head_end = comp;
    // The CPU AdamW, run as the gradients arrive (clipping: all after the norm, below). Without
    // clipping a ring piece is updated as soon as the CPU is free, a held unit's pieces (in unit
    // order) whenever no ring piece waits; ring slots are few, so a ring gradient's D2H waits for
    // the update of the piece `slots` before it, and the compute stream, which converts the next
    // layer's gradient into the slot's stage, waits for the stage's D2H: where the CPU is slower
    // than the backward, it paces the backward. Before the GPU's end (not known until then:
    // `gpu_end` is +inf in the backward) the AdamW runs at its rate under copies, alone after.
    double gpu_end = 1e300;
    auto serve = [&](double start, double n) {
      const double fast = m.adam_params_per_s, slow = m.adam_copy_params_per_s;
      if (start >= gpu_end) return start + n / fast;
      const double before = (gpu_end - start) * slow;
      return n <= before ? start + n / slow : gpu_end + (n - before) / fast;
    };
    struct Arrival {
      double t;
      size_t unit;
    };
    std::vector<Arrival> held;  // without clipping, by arrival
    size_t hi = 0;
    std::vector<std::pair<size_t, double>> pending;  // held unit, elements done
    double norm = 0;                                 // the last gradient reduced
    // Held work until a ring piece that arrives at `until` (a piece begun goes on past it).
    auto held_work = [&](double until) {
      for (;;) {
        for (; hi < held.size() && held[hi].t <= cpu; ++hi) {
          pending.emplace_back(held[hi].unit, 0.0);
          std::sort(pending.begin(), pending.end());
        }
        if (!pending.empty() && cpu < until) {
          auto& [u, done] = pending.front();
          const double k = std::min(double(plan.grad_piece), double(numel[u]) - done);
          // through the next step's forward, whose uploads run beside it: the rate under copies
          cpu = cpu < gpu_end ? serve(cpu, k) : cpu + k / m.adam_copy_params_per_s;
          done += k;
          if (done >= double(numel[u])) {
            ready[u] = cpu;
            pending.erase(pending.begin());
          }
        } else if (pending.empty() && hi < held.size() && held[hi].t < until) {
          cpu = held[hi].t;  // idle until the next held gradient
        } else {
          return;
        }
      }
    };
    const int slots = plan.grad_ring_slots;
    std::vector<double> ring_free(size_t(std::max(slots, 1)), 0.0);  // per ring slot
    int next_slot = 0;
    // Unit u's gradient goes D2H from `from` on; returns when its D2H is done.
    auto send = [&](size_t u, double from) {
      if (plan.on_device[u]) return from;
      const double bytes = double(numel[u]) * double(plan.dtype_bytes);
      if (clipping || plan.held[u] || slots == 0) {
        d2h = std::max({d2h, from, moments[u]}) + bytes / d2h_rate;
        norm = std::max(norm, d2h);
        if (!clipping) held.push_back({d2h, u});
        return d2h;
      }
      const double piece = double(std::max<int64_t>(plan.grad_piece, 1));
      for (double off = 0; off < double(numel[u]); off += piece) {
        const double k = std::min(piece, double(numel[u]) - off);
        double& slot = ring_free[size_t(next_slot)];
        next_slot = (next_slot + 1) % slots;
        d2h = std::max({d2h, from, slot}) + k * double(plan.dtype_bytes) / d2h_rate;
        held_work(d2h);
        cpu = serve(std::max(cpu, d2h), k);
        slot = cpu;
      }
      ready[u] = cpu;
      norm = std::max(norm, cpu);
      return d2h;
    };
    send(head_unit, comp);
    // backward
    const double ckpt_on_host = offload_end.empty() ? comp : offload_end.back();
    std::vector<double> bwd_end(size_t(L), comp);
    std::vector<double> stage_free(size_t(W), t0);  // per slot: its stage's last D2H done
    double restore_end = comp;
    if (L >= 2) h2d = restore_end = std::max(h2d, ckpt_on_host) + act / h2d_rate;  // x_{L-2}
    double restore_ready = restore_end;
    for (int j = L - 1; j >= 0; --j) {
      // layers j-W+1 .. j: the last W of the forward are still in their slots
      const int k = j - W + 1;
      if (k >= 0 && k < L - W) {
        const double slot_free = k + W < L ? bwd_end[size_t(k + W)] : comp;
        h2d = std::max(h2d, slot_free) + up(size_t(1 + k));
        up_end[size_t(k)] = h2d;
      }
      double start = std::max(comp, j < L - W ? up_end[size_t(j)] : t0);
      if (j < L - 1) start = std::max(start, restore_ready);
      comp = start + cb;
      bwd_end[size_t(j)] = comp;
      if (j >= 1 && j < L - 1) {  // restore x_{j-1}
        h2d = std::max(h2d, comp) + act / h2d_rate;
        restore_ready = h2d;
      } else if (j == L - 1) {
        restore_ready = restore_end;
      }
      if (plan.on_device[size_t(1 + j)]) {  // updated on the device right after its backward
        ready[size_t(1 + j)] = comp;
        continue;
      }
      double& stage = stage_free[size_t(j % W)];
      comp = std::max(comp, stage);  // the conversion into the stage waits for its last D2H
      stage = send(size_t(1 + j), comp);
    }
    send(0, comp);  // the embedding's backward is quick
    gpu_end = std::max(comp, d2h);
    double end = gpu_end;
    if (!clipping) {
      // The held units left over, into the next step's forward; the step ends once every
      // gradient is reduced: a held one when it arrives, a ring one with its update.
      held_work(1e300);
      end = std::max(end, norm);
    } else {
      norm = std::max(norm, gpu_end);
      cpu = std::max(cpu, norm);
      // After the GPU's end, through the next forward: each unit's pass (a moments_later unit's
      // master pass) at its rate alone, or slower where the host's memory binds: the next
      // forward uploads each updated master (4 B/param) as the pass goes, so the pass and its
      // upload share the host's ceiling (where the probe measured it).
      const double gb = double(plan.dtype_bytes), ceiling = host_ceiling(m, gb);
      auto pass_rate = [&](AdamWWrite what, double alone) {
        return ceiling > 0 ? std::min(alone, ceiling / (adamw_bytes_per_param(what, gb) + 4.0))
                           : alone;
      };
      const double whole_rate = pass_rate(AdamWWrite::kAll, m.adam_params_per_s);
      const double master_rate = m.adam_master_params_per_s > 0
                                     ? pass_rate(AdamWWrite::kWeights, m.adam_master_params_per_s)
                                     : whole_rate;
      for (size_t u = 0; u < numel.size(); ++u) {
        if (plan.on_device[u]) continue;
        cpu += double(numel[u]) / (plan.moments_later[u] ? master_rate : whole_rate);
        ready[u] = cpu;
      }
      // Then the moments, from the top unit down, beside the next step's copies.
      for (size_t u = numel.size(); u-- > 0;) {
        if (!plan.moments_later[u]) continue;
        cpu += double(numel[u]) / m.adam_moments_params_per_s * m.adam_params_per_s /
               m.adam_copy_params_per_s;
        moments[u] = cpu;
      }
      end = norm;
    }
    if (totals) {
      totals->forward_s = forward_end - t0;
      totals->head_s = head_end - forward_end;
      totals->backward_s = gpu_end - head_end;
      totals->tail_s = end - gpu_end;
    }
    return Out{end, forward_end, head_end, gpu_end};
  }
};

}  // namespace

double micro_batch_cost(const MachineConstants& m, int64_t micro_tokens) {
  const double ref = double(std::min(m.micro_tokens, kSaturatingTokens));
  if (m.micro_tokens <= 0 || micro_tokens <= 0 || double(micro_tokens) >= ref) return 1;
  return std::pow(1 + kSmallMicroBatchCost, std::log2(ref / double(micro_tokens)));
}

StepPrediction predict_step(const EnginePlan& plan, const ModelSpec& spec,
                            const MachineConstants& m, int64_t tokens, bool clipping) {
  SF_CHECK(m.h2d_gbps > 0 && m.d2h_gbps > 0 && m.adam_params_per_s > 0 &&
               m.adam_copy_params_per_s > 0 && m.layer_tflops > 0,
           "predict: the machine constants are incomplete");
  Sim s{plan,
        spec,
        m,
        tokens,
        clipping,
        {},
        m.h2d_gbps * 1e9,
        m.d2h_gbps * 1e9,
        0,
        micro_batch_cost(m, plan.micro_tokens)};
  for (const UnitLayout& u : unit_layouts(spec)) s.numel.push_back(u.numel);
  SF_CHECK(s.numel.size() == plan.on_device.size() && s.numel.size() == plan.held.size() &&
               s.numel.size() == plan.moments_later.size(),
           "predict: the plan is for another model");
  SF_CHECK(plan.moments_later_params == 0 ||
               (m.adam_master_params_per_s > 0 && m.adam_moments_params_per_s > 0),
           "predict: the plan writes m and v later but the machine's rates for those passes are "
           "unknown");
  // The fused head: logits and their gradients against the head matrix, 6·C·V per token.
  s.head_flops = 6.0 * double(tokens) * double(spec.hidden) * double(spec.vocab);
  StepPrediction p;
  // Steady state: three steps back to back (clipped updates run into the next step), the last
  // one counted.
  std::vector<double> ready(s.numel.size(), 0.0), moments(s.numel.size(), 0.0);
  double t = 0, cpu = 0;
  for (int k = 0; k < 2; ++k) t = s.step(t, ready, cpu, moments, nullptr).end;
  const double t0 = t;
  p.step_s = s.step(t0, ready, cpu, moments, &p).end - t0;
  const int L = int(spec.layers), W = plan.window;
  const double act = double(tokens * spec.hidden) * double(plan.dtype_bytes);
  for (size_t u = 0; u < s.numel.size(); ++u) {
    const bool layer = u >= 1 && u <= size_t(L);
    const int uploads = layer ? (int(u) - 1 < L - W ? 2 : 1) : 1;
    if (!plan.on_device[u]) {
      p.h2d_bytes += uploads * 4.0 * double(s.numel[u]);
      p.d2h_bytes += double(s.numel[u]) * double(plan.dtype_bytes);
      p.host_params += double(s.numel[u]);
    }
  }
  p.h2d_bytes += std::max(0, L - 1) * act;  // restores
  p.d2h_bytes += L * act;                   // checkpoint offloads
  // The host's memory: the AdamW reads p, m, v and the gradient and writes p, m, v (a
  // moments_later unit's two passes read m, v and the gradient twice; a held gradient's Σ g² is
  // formed on the GPU before its D2H); the DMA reads and writes it both ways. Its
  // ceiling: the most the probe saw a pass alone carry (host_ceiling). Only where the probe
  // measured the copies beside the AdamW (cache version 4).
  const double gb = double(plan.dtype_bytes);
  for (size_t u = 0; u < s.numel.size(); ++u) {
    if (plan.on_device[u]) continue;
    const double n = double(s.numel[u]);
    p.host_bytes += n * (plan.moments_later[u] ? adamw_bytes_per_param(AdamWWrite::kWeights, gb) +
                                                     adamw_bytes_per_param(AdamWWrite::kMoments, gb)
                                               : adamw_bytes_per_param(AdamWWrite::kAll, gb));
  }
  p.host_bytes += p.h2d_bytes + p.d2h_bytes;
  if (const double ceiling = host_ceiling(m, gb); ceiling > 0) {
    p.host_s = p.host_bytes / ceiling;
    p.step_s = std::max(p.step_s, p.host_s);
  }
  p.compute_s = double(tokens) * double(L) * (m.layer_forward_s + m.layer_backward_s) * s.cost +
                s.head_flops / (m.layer_tflops * 1e12);
  p.h2d_s = p.h2d_bytes / s.h2d_rate;
  p.d2h_s = p.d2h_bytes / s.d2h_rate;
  p.adam_s = p.host_params / m.adam_copy_params_per_s;
  p.disk_read_bytes = plan.nvme_read_bytes;
  p.disk_write_bytes = plan.nvme_write_bytes;
  if (plan.nvme_disk > 0) {
    SF_CHECK(m.nvme_read_gbps > 0 && m.nvme_write_gbps > 0,
             "predict: the plan has an NVMe tier but the disk's bandwidth is unknown");
    p.disk_s = disk_seconds(p.disk_read_bytes, p.disk_write_bytes, m.nvme_read_gbps,
                            m.nvme_write_gbps, m.nvme_mixed_gbps);
    // The disk streams beside the rest: the step is the longer of the two.
    p.step_s = std::max(p.step_s, p.disk_s);
  }
  const std::pair<double, const char*> floors[] = {
      {p.compute_s, "the GPU's compute"}, {p.h2d_s, "H2D copies (PCIe)"},
      {p.d2h_s, "D2H copies (PCIe)"},     {p.adam_s, "the CPU AdamW"},
      {p.host_s, "the host's memory"},    {p.disk_s, "the NVMe disk"}};
  p.bound = std::max_element(std::begin(floors), std::end(floors))->second;
  return p;
}

std::string StepPrediction::describe(int64_t tokens) const {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "predicted step " << step_s << " s (" << int64_t(double(tokens) / step_s + 0.5)
    << " tok/s): forward " << forward_s << " s, head " << head_s << " s, backward " << backward_s
    << " s, CPU AdamW after the GPU " << tail_s << " s; bound by " << bound
    << "\n  per step: compute " << compute_s << " s, H2D " << h2d_bytes * 1e-9 << " GB (" << h2d_s
    << " s), D2H " << d2h_bytes * 1e-9 << " GB (" << d2h_s << " s), CPU AdamW "
    << host_params * 1e-9 << " G params (" << adam_s << " s), host memory " << host_bytes * 1e-9
    << " GB";
  if (host_s > 0) o << " (" << host_s << " s)";
  if (disk_s > 0)
    o << ", disk " << disk_read_bytes * 1e-9 << " GB read + " << disk_write_bytes * 1e-9
      << " GB written (" << disk_s << " s)";
  return o.str();
}

}  // namespace sf
