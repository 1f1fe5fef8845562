// Package xdp runs real eBPF XDP programs on the frames a vnic port receives.
//
// The kernel cannot attach a program to a software port, so each frame is run through the
// program with BPF_PROG_TEST_RUN (https://docs.kernel.org/bpf/bpf_prog_run.html): the kernel
// copies the frame into a page of its own with XDP_PACKET_HEADROOM (256 bytes) in front of it,
// runs the program once and copies the resulting frame and the xdp_md context back. A Program
// is a vnic.XDPProgram: Run takes the RX buffer exactly as mana_run_xdp sees it (the frame at
// buf[data:end], headroom before it) and returns the verdict and the new frame bounds.
//
// What BPF_PROG_TEST_RUN on Linux 6.18 accepts and how Run uses it (checked on this kernel, see
// xdp_convert_md_to_buff and bpf_prog_test_run_xdp in net/bpf/test_run.c):
//
//   - Data must be at least ETH_HLEN (14) bytes, else EINVAL: Run refuses shorter frames itself.
//   - Frames up to PAGE_SIZE - 256 - 320 = 3520 bytes are linear, which covers every frame a
//     4K-page port with XDP can receive (MANA_XDP_MTU_MAX 3506 + ETH_HLEN). Longer frames (ports
//     modelling 16K or 64K pages) are passed as a multi-buffer xdp_buff whose linear part is
//     3520 bytes, even for programs loaded without BPF_F_XDP_HAS_FRAGS; the output is still the
//     whole frame.
//   - The context (struct xdp_md) may carry ingress_ifindex and rx_queue_index; data_meta and
//     egress_ifindex must be 0 and data_end the frame length. A non-zero rx_queue_index needs a
//     non-zero ingress_ifindex (EINVAL otherwise); the ifindex is looked up in the calling
//     thread's network namespace (ENODEV if absent) and the queue must be below the device's
//     real_num_rx_queues (EINVAL otherwise; a multi-queue TAP has as many as it has attached
//     queues). Without an ifindex the program sees the loopback device (ifindex 1) and queue 0.
//     Run passes the ifindex set with SetIngress and the queue index; when the kernel refuses
//     them (the program has not run yet at that point) it runs the frame again without them and
//     counts an ingress fallback.
//   - The output starts at data_meta: with metadata (bpf_xdp_adjust_meta) it precedes the frame,
//     and the returned context's data field is its length. mana_run_xdp prepares its buffer
//     without metadata support, so Run strips it and returns only the frame.
//   - When the output is longer than data_size_out the kernel copies what fits and fails with
//     ENOSPC: Run gives the whole RX buffer as the output area, so a frame that cannot fit the
//     buffer is an error (vnic counts it as XDP_ABORTED).
//
// BPF_PROG_TEST_RUN returns only the resulting bytes, not where bpf_xdp_adjust_head and
// bpf_xdp_adjust_tail moved the frame's edges, so Run places the result itself: it keeps the
// frame's end where it was (what bpf_xdp_adjust_head does, the usual way to push or pop a
// header), or, when the frame grew by more than the headroom, its start (what
// bpf_xdp_adjust_tail does). The bytes are identical either way; only the split of the spare
// room between headroom and tailroom can differ from a real driver.
//
// XDP_REDIRECT is only a verdict here (no live frames): the vnic model has no redirect targets
// and counts it as a drop, as mana_run_xdp does when xdp_do_redirect fails.
package xdp
