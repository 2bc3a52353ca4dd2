"""sleep"""
