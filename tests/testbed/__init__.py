"""The test bed: sshd containers from a debootstrap image, reached on 127.0.0.1 ports."""
