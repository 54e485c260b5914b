"""What counts as losing an SSH transport (shared by SSHHost and its SFTP transfers)."""
import socket

import paramiko

LOSS = (paramiko.SSHException, EOFError, OSError, socket.timeout)


class TransportLost(Exception):
    """Internal: the transport went away; SSHHost turns it into HostLost or one reconnect."""
