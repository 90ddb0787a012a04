// Package packaging holds what the deb and rpm packages install besides the
// binary (the agent's systemd unit) and run (prerm.sh, before removal); its
// tests check the scripts. goreleaser.yaml names them.
package packaging
